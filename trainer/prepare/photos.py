"""Real-photo benchmark data: JPEG crops of about 400x350 cut from the sample photos that ship in
the scikit-image wheel, written as ImageNet-schema TFRecords (`python -m trainer.prepare photos`).
They give the input-pipeline benchmark real JPEG decoding and cropping work at ImageNet-like
sizes without any download beyond the wheel."""

import importlib.util
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

from trainer.data import dataset_json
from trainer.errors import PipelineError
from trainer.prepare import image_folder

# Photos in skimage/data (0.19-0.26), one class each; camera.png is greyscale, decoded to RGB.
PHOTOS = ('astronaut.png', 'camera.png', 'chelsea.png', 'coffee.png', 'hubble_deep_field.jpg',
          'ihc.png', 'motorcycle_left.png', 'motorcycle_right.png', 'retina.jpg', 'rocket.jpg')
CROP = (350, 400)  # height, width


def photo_paths():
  """Paths of the sample photos inside the installed scikit-image package. It is not imported
  (that would need SciPy and more): only its data files are read.

  Raises:
    PipelineError: scikit-image is not installed or lacks one of PHOTOS.
  """
  spec = importlib.util.find_spec('skimage')
  if spec is None:
    raise PipelineError('photos cuts the sample photos shipped with scikit-image: run '
                        '`pip install --no-deps scikit-image` in this environment.')
  data_dir = os.path.join(list(spec.submodule_search_locations)[0], 'data')
  paths = [os.path.join(data_dir, name) for name in PHOTOS]
  missing = [os.path.basename(p) for p in paths if not os.path.exists(p)]
  if missing:
    raise PipelineError('this scikit-image has no %s in %s; use scikit-image 0.19-0.26.'
                        % (', '.join(missing), data_dir))
  return paths


def write_crops(tree, num_images, seed=0):
  """Writes `num_images` JPEGs (quality 90) of CROP pixels into tree/<photo>/NNNNN.jpg, cycling
  over the photos: each is resized so its crop-relative shorter side is 1-1.6x the crop, then
  cut at a random place."""
  rng = np.random.RandomState(seed)
  paths = photo_paths()
  with tf.Graph().as_default():
    encoded_in = tf.placeholder(tf.string, [])
    size_in = tf.placeholder(tf.int32, [2])
    box_in = tf.placeholder(tf.int32, [2])
    decoded = tf.io.decode_image(encoded_in, channels=3, expand_animations=False)
    decoded_shape = tf.shape(decoded)
    resized = tf.image.resize(decoded, size_in)
    crop = tf.image.crop_to_bounding_box(resized, box_in[0], box_in[1], CROP[0], CROP[1])
    jpeg = tf.io.encode_jpeg(tf.cast(tf.round(tf.clip_by_value(crop, 0, 255)), tf.uint8),
                             quality=90)
    with tf.Session() as sess:
      sources = []
      for path in paths:
        with open(path, 'rb') as f:
          encoded = f.read()
        sources.append((path, encoded, sess.run(decoded_shape, {encoded_in: encoded})[:2]))
      for index in range(num_images):
        path, encoded, (height, width) = sources[index % len(sources)]
        scale = max(CROP[0] / height, CROP[1] / width) * rng.uniform(1.0, 1.6)
        size = [int(np.ceil(height * scale)), int(np.ceil(width * scale))]
        box = [rng.randint(0, size[0] - CROP[0] + 1), rng.randint(0, size[1] - CROP[1] + 1)]
        data = sess.run(jpeg, {encoded_in: encoded, size_in: size, box_in: box})
        class_dir = os.path.join(tree, os.path.splitext(os.path.basename(path))[0])
        os.makedirs(class_dir, exist_ok=True)
        with open(os.path.join(class_dir, '%05d.jpg' % index), 'wb') as f:
          f.write(data)


def prepare(output_dir, num_images, train_shards=8, validation_shards=2, options=None,
            overwrite=False, lease=None):
  """Real-photo records for the input benchmark: `num_images` JPEG crops of 400x350 cut from the
  scikit-image sample photos (`write_crops`), one class per photo, 10% held out by a stable
  hash, converted by image_folder (Beam `options`, `overwrite`, `lease` as there). Returns the
  dataset.json dict.

  Raises:
    PipelineError: scikit-image missing, or fewer than two images per photo.
  """
  if num_images < 2 * len(PHOTOS):
    raise PipelineError('--num_images=%d: photos needs at least %d (two per photo).'
                        % (num_images, 2 * len(PHOTOS)))
  tree = tempfile.mkdtemp(prefix='photos-')
  try:
    write_crops(tree, num_images)
    info = image_folder.prepare(tree, output_dir, 0.1, train_shards, validation_shards,
                                options=options, overwrite=overwrite, lease=lease)
  finally:
    shutil.rmtree(tree, ignore_errors=True)
  info.update(name='photos', source='scikit-image sample photos: %s' % ', '.join(PHOTOS))
  dataset_json.write(output_dir, info)
  return info
