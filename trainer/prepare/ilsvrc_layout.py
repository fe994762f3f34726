"""The ILSVRC-2012 (ImageNet) source layout and the Cloud TPU converters' output conventions,
without Apache Beam, so the command line can name them before Beam is imported."""

TRAIN_DIR = 'train'
VALIDATION_DIRS = ('val', 'validation')
# The flat validation folder's labels: one wnid per line, for the files in sorted name order (the
# file the Cloud TPU converter reads).
DEFAULT_VALIDATION_LABELS = 'synset_labels.txt'
DEFAULT_TRAIN_SHARDS = 1024
DEFAULT_VALIDATION_SHARDS = 128
LABEL_OFFSET = 1  # image/class/label = 1 + the wnid's index in sorted order
IMAGE_EXTENSIONS = ('.jpeg', '.jpg')
# The size ImageNet networks train at (ResNet; InceptionV3 takes --image_size=299), recorded in
# dataset.json so the trainer does not derive it from the photos' median size (~500x375).
TRAIN_IMAGE_SIZE = 224
