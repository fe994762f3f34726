"""InceptionV3's constants (Szegedy et al. 2016, "Rethinking the Inception Architecture for
Computer Vision")."""

# A faster-moving average than the paper's 0.9997 so the eval statistics settle within the few
# thousand steps of a small-data run; epsilon as in the reference implementations.
BATCH_NORM_DECAY = 0.99
BATCH_NORM_EPSILON = 1e-3
DROPOUT_RATE = 0.2  # before the logits (keep probability 0.8 in the reference implementation)
AUX_SCOPE = 'AuxLogits'
CLASSIFIER_SCOPE = 'logits'  # the auxiliary head is in AUX_SCOPE
# The stem and the two stride-2 'VALID' grid reductions leave a 1x1 map at 75x75; smaller inputs
# would reduce to nothing (Sec. 9 of the paper trains a 79x79 variant).
MIN_IMAGE_SIZE = 75
