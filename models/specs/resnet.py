"""ResNet v1.5's constants (He et al. 2016, "Deep Residual Learning for Image Recognition")."""

# TPU-friendly batch norm: a faster-moving average than Keras' 0.99 suits the short TPU schedules
# (the reference Cloud TPU ResNet uses 0.9 / 1e-5), and fused kernels exist on every backend.
BATCH_NORM_DECAY = 0.9
BATCH_NORM_EPSILON = 1e-5

# Blocks per stage for each depth (He et al. 2016, Table 1; 200 from He et al. 2016b).
BLOCKS = {
    18: ('basic', (2, 2, 2, 2)),
    34: ('basic', (3, 4, 6, 3)),
    50: ('bottleneck', (3, 4, 6, 3)),
    101: ('bottleneck', (3, 4, 23, 3)),
    152: ('bottleneck', (3, 8, 36, 3)),
    200: ('bottleneck', (3, 24, 36, 3)),
}
DEPTHS = tuple(sorted(BLOCKS))
# The classifier's variable scope (the Cloud TPU reference ResNet names it the same).
CLASSIFIER_SCOPE = 'dense'
