"""Reads one image file's bytes into what an ImageNet-schema record holds: the encoded image, its
format and its decoded shape, repairing the known ImageNet quirks on the way (CMYK JPEGs, a PNG
named .JPEG, greyscale JPEGs), as the Cloud TPU converters do.

Every image is decoded (a kept JPEG at 1/8 scale, which still reads all of its data), so a
truncated or corrupt file is found here, at conversion time, and not by the trainer's input
pipeline days later.
"""

import struct

import tensorflow.compat.v1 as tf

# The RGB re-encoding keeps the most of the source: quality 100, as in the Cloud TPU and TFDS
# ImageNet converters' CMYK and PNG repairs, and full-resolution chroma (on a CMYK photo the mean
# pixel error is 1.7 levels with it, 3.1 with the default 2x2 chroma subsampling).
REENCODE_QUALITY = 100

_MAGIC = ((b'\xff\xd8\xff', 'JPEG'), (b'\x89PNG\r\n\x1a\n', 'PNG'), (b'GIF8', 'GIF'),
          (b'BM', 'BMP'))
# JPEG start-of-frame markers (baseline, extended, progressive, lossless...); C4, C8 and CC are
# not frames (Huffman tables, reserved, arithmetic coding conditioning).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


class UnreadableImage(Exception):
  """The bytes are not an image this converter can decode; str() says why."""


def sniff_format(encoded):
  """'JPEG', 'PNG', 'GIF' or 'BMP' from the first bytes (not the file name), or None."""
  for magic, name in _MAGIC:
    if encoded.startswith(magic):
      return name
  return None


def jpeg_frame(encoded):
  """(height, width, components) from a JPEG's frame header, read without decoding (components:
  1 greyscale, 3 YCbCr or RGB, 4 CMYK or YCCK); None when no usable frame header is found."""
  i = 2
  while i + 4 <= len(encoded):
    if encoded[i] != 0xFF:  # stray bytes between segments: libjpeg skips to the next marker
      i += 1
      continue
    marker = encoded[i + 1]
    if marker == 0xFF:  # fill byte
      i += 1
      continue
    if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
      i += 2
      continue
    (length,) = struct.unpack('>H', encoded[i + 2:i + 4])
    if marker in _SOF_MARKERS:
      if i + 10 > len(encoded):
        return None
      height, width = struct.unpack('>HH', encoded[i + 5:i + 9])
      return height, width, encoded[i + 9]
    i += 2 + length
  return None


def jpeg_components(encoded):
  """The number of colour components of a JPEG (see jpeg_frame), or None."""
  frame = jpeg_frame(encoded)
  return frame[2] if frame else None


def _repair_for(image_format, components, jpeg_only):
  """What convert() re-encodes an image of this format and JPEG component count as ('cmyk',
  'grayscale', 'jpeg_header', 'png', 'gif', 'bmp'), or None when its bytes are kept."""
  if image_format == 'JPEG':
    if components == 4:
      return 'cmyk'
    if components == 1 and jpeg_only:
      return 'grayscale'
    if components not in (1, 3) and jpeg_only:  # no readable frame header: make sure
      return 'jpeg_header'
    return None
  if image_format in ('GIF', 'BMP') or jpeg_only:
    return image_format.lower()
  return None


class ImageCoder(object):
  """Decodes and, where needed, re-encodes images in one TensorFlow session (TF 1.x and 2.x).

  Build one per worker process: the graph and session are reused for every image. A JPEG kept as
  it is (ImageNet's common case) is checked by decoding it at 1/8 scale, which reads and Huffman-
  decodes all of its data as a full decode does (so a truncated or corrupt file fails the same
  way) but skips most of the inverse DCT and colour conversion; its size comes from the frame
  header, and batches of such JPEGs share one session call (the call costs about as much as the
  decode on TF 1.15).
  """

  def __init__(self):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._encoded = tf.placeholder(tf.string, [])
      # Kept bytes: the shape as stored (1 or 3 channels). Repaired: decoded to RGB, re-encoded.
      self._shape = tf.shape(tf.io.decode_image(self._encoded, expand_animations=False))
      rgb = tf.io.decode_image(self._encoded, channels=3, expand_animations=False)
      self._rgb_shape = tf.shape(rgb)
      self._jpeg = tf.image.encode_jpeg(rgb, format='rgb', quality=REENCODE_QUALITY,
                                        chroma_downsampling=False)
      pixels = tf.cast(rgb, tf.float64)
      self._sums = tf.stack([tf.reduce_sum(pixels, [0, 1]),
                             tf.reduce_sum(tf.square(pixels), [0, 1])])
      self._jpegs = tf.placeholder(tf.string, [None])
      # One core per coder: the converter's parallelism is its worker processes.
      self._checked = tf.map_fn(lambda d: tf.shape(tf.io.decode_jpeg(d, ratio=8))[:2],
                                self._jpegs, dtype=tf.int32, parallel_iterations=1,
                                back_prop=False)
    self._session = tf.Session(graph=self._graph)

  def close(self):
    self._session.close()

  def channel_sums(self, encoded):
    """float64 [2, 3]: the RGB image's per-channel sum and sum of squares (0-255 scale)."""
    return self._session.run(self._sums, {self._encoded: encoded})

  def convert_many(self, images, jpeg_only):
    """convert() for a list of encoded images; returns a list with, per image, convert()'s tuple
    or the UnreadableImage it raised (one bad image does not stop the others)."""
    results = [None] * len(images)
    batch, frames = [], {}
    for i, encoded in enumerate(images):
      frame = jpeg_frame(encoded) if sniff_format(encoded) == 'JPEG' else None
      if (frame and frame[0] and frame[1] and frame[2] in (1, 3) and
          _repair_for('JPEG', frame[2], jpeg_only) is None):
        batch.append(i)
        frames[i] = frame
      else:
        results[i] = self._convert_or_error(encoded, jpeg_only)
    if batch:
      try:
        shapes = self._session.run(self._checked, {self._jpegs: [images[i] for i in batch]})
      except tf.errors.OpError:  # one of them is bad: find which, one at a time
        shapes = None
      for k, i in enumerate(batch):
        height, width, components = frames[i]
        if shapes is None or list(shapes[k]) != [-(-height // 8), -(-width // 8)]:
          results[i] = self._convert_or_error(images[i], jpeg_only)
        else:
          results[i] = (images[i], 'JPEG', height, width, components, None)
    return results

  def _convert_or_error(self, encoded, jpeg_only):
    try:
      return self.convert(encoded, jpeg_only)
    except UnreadableImage as e:
      return e

  def convert(self, encoded, jpeg_only):
    """Decodes `encoded` (bytes); returns (encoded, image_format, height, width, channels,
    repair).

    Args:
      encoded: the file's bytes.
      jpeg_only: True (ImageNet): anything but a 3-component JPEG is re-encoded as an RGB JPEG
        (PNG/GIF/BMP, CMYK, greyscale). False: PNG and JPEG bytes are kept as they are and only
        GIF/BMP and CMYK JPEGs, which not every decoder reads, are re-encoded.

    Returns:
      encoded: bytes to store, format 'JPEG' or 'PNG'; height, width: ints (pixels); channels:
      1 (kept greyscale) or 3; repair: None, or what was re-encoded ('png', 'cmyk',
      'grayscale', 'gif', 'bmp').

    Raises:
      UnreadableImage: not a JPEG/PNG/GIF/BMP, or its data does not decode.
    """
    image_format = sniff_format(encoded)
    if image_format is None:
      raise UnreadableImage('not a JPEG, PNG, GIF or BMP file (first bytes %r)' % encoded[:8])
    repair = _repair_for(image_format,
                         jpeg_components(encoded) if image_format == 'JPEG' else None, jpeg_only)
    try:
      if repair:
        shape, encoded = self._session.run([self._rgb_shape, self._jpeg],
                                           {self._encoded: encoded})
        image_format = 'JPEG'
      else:
        shape = self._session.run(self._shape, {self._encoded: encoded})
    except tf.errors.OpError as e:
      raise UnreadableImage('%s data does not decode (%s)'
                            % (image_format, e.message.splitlines()[0]))
    channels = 3 if shape[2] >= 3 else 1  # 4: a PNG's alpha, dropped by the trainer's decode
    return encoded, image_format, int(shape[0]), int(shape[1]), channels, repair
