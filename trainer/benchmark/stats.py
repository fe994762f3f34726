"""Statistics of timed windows that need only numpy, so that scripts without TensorFlow
(scripts/benchmark-tables) share them with `trainer.benchmark`."""

import numpy as np


def median_interval(values, confidence=0.9, resamples=10000, seed=0):
  """Percentile-bootstrap confidence interval of the median of `values` (Efron and Tibshirani,
  "An Introduction to the Bootstrap", 1993, section 13.3): the median of `resamples` resamples
  with replacement, and the (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of those
  medians. Deterministic for a given `seed`.

  Args:
    values: 1-D sequence of floats, at least 2.
  Returns:
    (low, high), floats in the units of `values`.
  Raises:
    ValueError: fewer than 2 values or confidence outside (0, 1).
  """
  values = np.asarray(values, dtype=np.float64)
  if values.ndim != 1 or len(values) < 2:
    raise ValueError('need at least 2 values for an interval, got %r' % (values.tolist(),))
  if not 0.0 < confidence < 1.0:
    raise ValueError('confidence must be in (0, 1), got %r' % confidence)
  rng = np.random.RandomState(seed)
  medians = np.median(values[rng.randint(0, len(values), size=(resamples, len(values)))], axis=1)
  tail = 100.0 * (1.0 - confidence) / 2.0
  low, high = np.percentile(medians, [tail, 100.0 - tail])
  # Every resampled median lies within the values; numpy's interpolation between two equal
  # neighbours can land one float step outside them (seen: a CI run's failed bound check).
  low, high = np.clip([low, high], values.min(), values.max())
  return float(low), float(high)
