"""A small ILSVRC-2012-style source tree of real photos for the imagenet converter's tests, with
the quirks of the real archive: a CMYK JPEG, a PNG named .JPEG and a greyscale JPEG."""

import os
import shutil

import tensorflow.compat.v1 as tf

from trainer.prepare import photos

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')
CMYK_FIXTURE = os.path.join(FIXTURES, 'coffee_cmyk.jpg')  # coffee.png, 200x133, saved as CMYK


def write_ilsvrc_tree(root, num_images, flat_validation=True, validation_per_class=2):
  """Writes root/train/<wnid>/<wnid>_<k>.JPEG and root/val/ (flat ILSVRC2012_val_NNNNNNNN.JPEG
  with root/synset_labels.txt, or val/<wnid>/) from `num_images` real photo crops, one class per
  sample photo (wnids n00000000..). The first class's first three training images are replaced by
  the CMYK fixture, a PNG and a greyscale JPEG, all named .JPEG.

  Returns:
    {file name: wnid} of every image written.
  """
  crops = os.path.join(root, 'crops')
  photos.write_crops(crops, num_images)
  truth = {}
  val_labels = []
  for c, photo in enumerate(sorted(os.listdir(crops))):
    wnid = 'n%08d' % c
    files = sorted(os.listdir(os.path.join(crops, photo)))
    os.makedirs(os.path.join(root, 'train', wnid))
    for k, name in enumerate(files):
      source = os.path.join(crops, photo, name)
      if k < validation_per_class:
        name = 'ILSVRC2012_val_%08d.JPEG' % (len(truth) + 1)
        folder = os.path.join(root, 'val') if flat_validation else os.path.join(root, 'val', wnid)
        val_labels.append((name, wnid))
      else:
        name = '%s_%d.JPEG' % (wnid, k)
        folder = os.path.join(root, 'train', wnid)
      os.makedirs(folder, exist_ok=True)
      shutil.copy(source, os.path.join(folder, name))
      truth[name] = wnid
  shutil.rmtree(crops)
  if flat_validation:
    with open(os.path.join(root, 'synset_labels.txt'), 'w') as f:
      f.write(''.join(w + '\n' for _, w in sorted(val_labels)))
  train0 = os.path.join(root, 'train', 'n%08d' % 0)
  quirks = sorted(os.listdir(train0))[:3]
  shutil.copy(CMYK_FIXTURE, os.path.join(train0, quirks[0]))
  with open(os.path.join(train0, quirks[1]), 'rb') as f:
    jpeg = f.read()
  with tf.Graph().as_default(), tf.Session() as sess:
    image = tf.io.decode_jpeg(jpeg, channels=3)
    png, grey = sess.run([tf.image.encode_png(image),
                          tf.image.encode_jpeg(tf.image.rgb_to_grayscale(image))])
  with open(os.path.join(train0, quirks[1]), 'wb') as f:
    f.write(png)
  with open(os.path.join(train0, quirks[2]), 'wb') as f:
    f.write(grey)
  return truth, dict(zip(('cmyk', 'png', 'grayscale'), quirks))
