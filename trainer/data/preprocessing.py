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

Every function returns uint8 pixels on the 0-255 scale, rounded after resizing: the model_fn
normalizes them (`models.model_fn.normalize_images`), as the Cloud TPU reference ResNet
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


def distorted_bbox(shape):
  """A random box of 8%-100% of the area, aspect ratio in [3/4, 4/3], in an image of `shape`.

  Args:
    shape: int32 [3], the image's [height, width, channels].

  Returns:
    (begin, size), int32 [3] each, for `tf.slice` (or the window of `decode_and_crop_jpeg`).
  """
  bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
  begin, size, _ = tf.image.sample_distorted_bounding_box(
      shape, bounding_boxes=bbox, min_object_covered=0.1,
      aspect_ratio_range=(3. / 4., 4. / 3.), area_range=(0.08, 1.0), max_attempts=10,
      use_image_if_no_bounding_boxes=True)
  return begin, size


def _distorted_bbox_crop(image, image_size):
  begin, size = distorted_bbox(tf.shape(image))
  return _resize(tf.slice(image, begin, size), image_size)


def decode_distorted_bbox_crop(encoded, image_size):
  """Decodes encoded image bytes straight into a 'distorted_bbox' training crop resized to
  image_size: float32 [image_size, image_size, 3] on the 0-255 scale.

  A JPEG is decoded only inside the crop window (`tf.image.decode_and_crop_jpeg`, with the box
  sampled from the header's shape), as the Cloud TPU ResNet input pipeline does: the crop covers
  54% of the image on average, and decoding is most of the host's work per image. Other formats
  are decoded whole and then cropped.
  """
  def crop_jpeg():
    begin, size = distorted_bbox(tf.image.extract_jpeg_shape(encoded))
    window = tf.stack([begin[0], begin[1], size[0], size[1]])
    return _resize(tf.image.decode_and_crop_jpeg(encoded, window, channels=3), image_size)

  def crop_decoded():
    return _distorted_bbox_crop(decode_image(encoded), image_size)

  return tf.cond(tf.io.is_jpeg(encoded), crop_jpeg, crop_decoded)


def _pad_and_crop(image, image_size, crop_padding):
  image = _to_uint8(_resize(image, image_size))
  image = tf.pad(image, [[crop_padding, crop_padding], [crop_padding, crop_padding], [0, 0]])
  return tf.random_crop(image, [image_size, image_size, 3])


def _central_crop(image, image_size, eval_crop_fraction):
  if eval_crop_fraction < 1.0:
    image = tf.image.central_crop(image, eval_crop_fraction)
  return _resize(image, image_size)


def _distort_color(image):
  """Random brightness (+-32/255), saturation and contrast (x0.5-1.5) and hue (+-0.2) on a
  float [0, 255] RGB image, clipped back to [0, 255]."""
  image = image / 255.0
  image = tf.image.random_brightness(image, max_delta=32. / 255.)
  image = tf.image.random_saturation(image, lower=0.5, upper=1.5)
  image = tf.image.random_hue(image, max_delta=0.2)
  image = tf.image.random_contrast(image, lower=0.5, upper=1.5)
  return tf.clip_by_value(image, 0.0, 1.0) * 255.0


def preprocess_image(image, is_training, image_size, train_crop='distorted_bbox', crop_padding=4,
                     eval_crop_fraction=0.875, random_flip=True, color_distortion=False):
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

  Returns:
    uint8 [image_size, image_size, 3], 0-255 (not normalized).

  Raises:
    ValueError: for an unknown train_crop.
  """
  if is_training:
    if train_crop == 'distorted_bbox':
      image = _distorted_bbox_crop(image, image_size)
    elif train_crop == 'pad_and_crop':
      image = _pad_and_crop(image, image_size, crop_padding)
    else:
      raise ValueError('train_crop must be one of %s, got %r' % (TRAIN_CROPS, train_crop))
    return _augment(image, image_size, random_flip, color_distortion)
  return _augment(_central_crop(image, image_size, eval_crop_fraction), image_size, False, False)


def preprocess_encoded(encoded, is_training, image_size, train_crop='distorted_bbox',
                       crop_padding=4, eval_crop_fraction=0.875, random_flip=True,
                       color_distortion=False):
  """`preprocess_image` from encoded JPEG/PNG bytes (string scalar). The same transformations;
  a 'distorted_bbox' training crop of a JPEG decodes only the crop window
  (`decode_distorted_bbox_crop`). Returns uint8 [image_size, image_size, 3], 0-255."""
  if is_training and train_crop == 'distorted_bbox':
    return _augment(decode_distorted_bbox_crop(encoded, image_size), image_size, random_flip,
                    color_distortion)
  return preprocess_image(decode_image(encoded), is_training, image_size, train_crop,
                          crop_padding, eval_crop_fraction, random_flip, color_distortion)


def _augment(image, image_size, random_flip, color_distortion):
  """Colour jitter and flip (as asked) of an [image_size, image_size, 3] 0-255 image (float32 from
  a resize, or uint8); returns it as uint8. The flip runs on uint8, after the rounding."""
  if color_distortion:
    image = _distort_color(tf.cast(image, tf.float32))
  if image.dtype != tf.uint8:
    image = _to_uint8(image)
  if random_flip:
    image = tf.image.random_flip_left_right(image)
  image.set_shape([image_size, image_size, 3])
  return image

