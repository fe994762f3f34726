"""Image preprocessing for ResNet-style training and evaluation.

Two training crops:
  * 'distorted_bbox': the ImageNet/Inception random-resized crop (Szegedy et al. 2015, "Going
    deeper with convolutions", Sec. 6): a random box covering 8%-100% of the area with aspect
    ratio in [3/4, 4/3], resized to image_size. Right for photos larger than the model input.
  * 'pad_and_crop': pad by `crop_padding` pixels and take a random image_size crop (He et al. 2016,
    Sec. 4.2, CIFAR-10). Right for small images (Fashion-MNIST, CIFAR) that are already framed.
Both flip horizontally at random unless `random_flip` is off (Fashion-MNIST: every shoe and bag
faces the same way, so a flip shows the model images the test set never has). With
`color_distortion` training images also get the Inception colour jitter (random brightness,
saturation, hue and contrast, as in the reference Inception preprocessing). Evaluation takes a
central crop of `eval_crop_fraction` of the image and resizes it to image_size (0.875 is the
ImageNet convention, 1.0 keeps the whole image).

Randomness is stateless: every training function takes `seed`, int64 [2], and draws all of one
example's random numbers from it (`tf.random.stateless_uniform`). The input_fn keys it by the
run's --seed and the example's position in this host's stream, so an example's crop and flip do
not depend on how many parallel calls run or in which order they finish, and a run repeats.

Every function returns uint8 pixels on the 0-255 scale, rounded after resizing: the model_fn
normalizes them (`models.network_contract.normalize_images`), as the Cloud TPU reference ResNet
does. A uint8 image is a quarter of the bytes of a float32 one to flip, batch and copy, which is
most of the host's work after decoding (see BENCHMARKS.md, input pipeline).
"""

import tensorflow.compat.v1 as tf

TRAIN_CROPS = ('distorted_bbox', 'pad_and_crop')


def decode_image(encoded):
  """Decodes JPEG/PNG/GIF/BMP bytes to uint8 [height, width, 3]; grayscale is expanded to RGB."""
  image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
  image.set_shape([None, None, 3])
  return image


def _resize(image, image_size):
  """Bilinear resize of a [h, w, 3] image to float32 [image_size, image_size, 3]."""
  # ResizeBilinear reads float32 input faster than uint8, by more than the cast costs
  # (BENCHMARKS.md, input pipeline).
  image = tf.image.resize_bilinear(tf.expand_dims(tf.cast(image, tf.float32), 0),
                                   [image_size, image_size],
                                   align_corners=False)
  return tf.squeeze(image, [0])


def _to_uint8(image):
  """Rounds a float image with values in [0, 255] (a bilinear resize of uint8 pixels stays in
  that range) to uint8."""
  return tf.cast(image + 0.5, tf.uint8)


# Each training example draws _NUM_UNIFORMS uniforms in [0, 1) from its seed: the crop attempts
# first, then the flip, the colour jitter and the pad-and-crop offsets.
_CROP_ATTEMPTS = 10
_FLIP = 4 * _CROP_ATTEMPTS
_COLOR = _FLIP + 1
_PAD_CROP = _COLOR + 4
_NUM_UNIFORMS = _PAD_CROP + 2
_AREA_RANGE = (0.08, 1.0)
_ASPECT_RATIO_RANGE = (3. / 4., 4. / 3.)
_MIN_OBJECT_COVERED = 0.1


def example_uniforms(seed):
  """The float32 [_NUM_UNIFORMS] uniforms in [0, 1) of the example keyed by `seed` (int64 [2])."""
  return tf.random.stateless_uniform([_NUM_UNIFORMS], seed=seed)


def distorted_bbox(shape, seed):
  """A random box of 8%-100% of the area, aspect ratio in [3/4, 4/3], in an image of `shape`.

  The distribution of `tf.image.sample_distorted_bounding_box` (min_object_covered=0.1, 10
  attempts, the whole image if none fits), drawn statelessly from `seed`: per attempt a uniform
  aspect ratio, then a height uniform over the integers that keep the area in range, then a
  uniform offset; the first attempt that fits wins.

  Args:
    shape: int32 [3], the image's [height, width, channels].
    seed: int64 [2], the example's seed.

  Returns:
    (begin, size), int32 [3] each, for `tf.slice` (or the window of `decode_and_crop_jpeg`).
  """
  u = tf.reshape(example_uniforms(seed)[:_FLIP], [4, _CROP_ATTEMPTS])
  height, width = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
  low, high = _ASPECT_RATIO_RANGE
  aspect = low + u[0] * (high - low)
  min_area, max_area = [f * height * width for f in _AREA_RANGE]
  h = tf.round(tf.sqrt(min_area / aspect))
  max_h = tf.round(tf.sqrt(max_area / aspect))
  # The tallest box whose width still fits: round(max_h * aspect) <= width.
  fit = tf.floor((width + 0.5 - 1e-7) / aspect)
  fit = tf.where(tf.round(fit * aspect) > width, fit - 1, fit)
  max_h = tf.minimum(tf.where(tf.round(max_h * aspect) > width, fit, max_h), height)
  h = tf.minimum(h, max_h)
  h += tf.floor(u[1] * (max_h - h + 1))
  w = tf.round(h * aspect)
  # Rounding can leave the area just outside the range: one step up, then one down.
  h = tf.where(w * h < min_area, h + 1, h)
  w = tf.round(h * aspect)
  h = tf.where(w * h > max_area, h - 1, h)
  w = tf.round(h * aspect)
  area = w * h
  fits = ((area >= min_area) & (area <= max_area) & (w <= width) & (h <= height) & (w > 0) &
          (h > 0) & (area >= _MIN_OBJECT_COVERED * height * width))
  y = tf.floor(u[2] * (height - h))
  x = tf.floor(u[3] * (width - w))
  first = tf.argmax(tf.cast(fits, tf.int32))
  box = tf.cast(tf.stack([y[first], x[first], h[first], w[first]]), tf.int32)
  box = tf.cond(tf.reduce_any(fits), lambda: box, lambda: tf.stack([0, 0, shape[0], shape[1]]))
  return tf.stack([box[0], box[1], 0]), tf.stack([box[2], box[3], -1])


def _distorted_bbox_crop(image, image_size, seed):
  begin, size = distorted_bbox(tf.shape(image), seed)
  return _resize(tf.slice(image, begin, size), image_size)


def decode_distorted_bbox_crop(encoded, image_size, seed):
  """Decodes encoded image bytes straight into a 'distorted_bbox' training crop resized to
  image_size: float32 [image_size, image_size, 3] on the 0-255 scale.

  A JPEG is decoded only inside the crop window (`tf.image.decode_and_crop_jpeg`, with the box
  sampled from the header's shape), as the Cloud TPU ResNet input pipeline does: the crop covers
  54% of the image on average, and decoding is most of the host's work per image. Other formats
  are decoded whole and then cropped.
  """
  def crop_jpeg():
    begin, size = distorted_bbox(tf.image.extract_jpeg_shape(encoded), seed)
    window = tf.stack([begin[0], begin[1], size[0], size[1]])
    return _resize(tf.image.decode_and_crop_jpeg(encoded, window, channels=3), image_size)

  def crop_decoded():
    return _distorted_bbox_crop(decode_image(encoded), image_size, seed)

  return tf.cond(tf.io.is_jpeg(encoded), crop_jpeg, crop_decoded)


def _pad_and_crop(image, image_size, crop_padding, seed):
  image = _to_uint8(_resize(image, image_size))
  image = tf.pad(image, [[crop_padding, crop_padding], [crop_padding, crop_padding], [0, 0]])
  offsets = tf.floor(example_uniforms(seed)[_PAD_CROP:] * (2 * crop_padding + 1))
  offsets = tf.cast(offsets, tf.int32)
  return tf.slice(image, tf.stack([offsets[0], offsets[1], 0]), [image_size, image_size, 3])


def _central_crop(image, image_size, eval_crop_fraction):
  if eval_crop_fraction < 1.0:
    image = tf.image.central_crop(image, eval_crop_fraction)
  return _resize(image, image_size)


def _distort_color(image, seed):
  """Random brightness (+-32/255), saturation and contrast (x0.5-1.5) and hue (+-0.2) on a
  float [0, 255] RGB image, clipped back to [0, 255]."""
  u = example_uniforms(seed)[_COLOR:_PAD_CROP]
  image = image / 255.0
  image = tf.image.adjust_brightness(image, (2 * u[0] - 1) * 32. / 255.)
  image = tf.image.adjust_saturation(image, 0.5 + u[1])
  image = tf.image.adjust_hue(image, (2 * u[2] - 1) * 0.2)
  image = tf.image.adjust_contrast(image, 0.5 + u[3])
  return tf.clip_by_value(image, 0.0, 1.0) * 255.0


def preprocess_image(image, is_training, image_size, train_crop='distorted_bbox', crop_padding=4,
                     eval_crop_fraction=0.875, random_flip=True, color_distortion=False,
                     seed=None):
  """Crops, flips (training only) and resizes one decoded image.

  Args:
    image: uint8 [height, width, 3].
    is_training: Python bool.
    image_size: output height and width in pixels.
    train_crop: one of TRAIN_CROPS.
    crop_padding: pixels of zero padding for 'pad_and_crop'.
    eval_crop_fraction: fraction of each side kept by the eval central crop, in (0, 1].
    random_flip: flip training images left-right with probability 0.5.
    color_distortion: jitter the colours of training images.
    seed: training: int64 [2], the example's seed (all its random numbers come from it).

  Returns:
    uint8 [image_size, image_size, 3], 0-255 (not normalized).

  Raises:
    ValueError: for an unknown train_crop, or training without a seed.
  """
  if is_training:
    if seed is None:
      raise ValueError('training preprocessing needs the example\'s seed')
    if train_crop == 'distorted_bbox':
      image = _distorted_bbox_crop(image, image_size, seed)
    elif train_crop == 'pad_and_crop':
      image = _pad_and_crop(image, image_size, crop_padding, seed)
    else:
      raise ValueError('train_crop must be one of %s, got %r' % (TRAIN_CROPS, train_crop))
    return _augment(image, image_size, random_flip, color_distortion, seed)
  return _augment(_central_crop(image, image_size, eval_crop_fraction), image_size, False, False,
                  None)


def preprocess_encoded(encoded, is_training, image_size, train_crop='distorted_bbox',
                       crop_padding=4, eval_crop_fraction=0.875, random_flip=True,
                       color_distortion=False, seed=None):
  """`preprocess_image` from encoded JPEG/PNG bytes (string scalar). The same transformations;
  a 'distorted_bbox' training crop of a JPEG decodes only the crop window
  (`decode_distorted_bbox_crop`). Returns uint8 [image_size, image_size, 3], 0-255."""
  if is_training and train_crop == 'distorted_bbox':
    if seed is None:
      raise ValueError('training preprocessing needs the example\'s seed')
    return _augment(decode_distorted_bbox_crop(encoded, image_size, seed), image_size,
                    random_flip, color_distortion, seed)
  return preprocess_image(decode_image(encoded), is_training, image_size, train_crop,
                          crop_padding, eval_crop_fraction, random_flip, color_distortion, seed)


def _augment(image, image_size, random_flip, color_distortion, seed):
  """Colour jitter and flip (as asked) of an [image_size, image_size, 3] 0-255 image (float32 from
  a resize, or uint8); returns it as uint8. The flip runs on uint8, after the rounding."""
  if color_distortion:
    image = _distort_color(tf.cast(image, tf.float32), seed)
  if image.dtype != tf.uint8:
    image = _to_uint8(image)
  if random_flip:
    flip = example_uniforms(seed)[_FLIP] < 0.5
    image = tf.cond(flip, lambda: tf.reverse(image, [1]), lambda: image)
  image.set_shape([image_size, image_size, 3])
  return image

