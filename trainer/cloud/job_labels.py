"""`trainer.submit --labels=KEY=VALUE,...`: the labels of a Vertex AI job (CustomJob field 11,
HyperparameterTuningJob field 16), for cost attribution in billing exports and filters.

The rules are custom_job.proto v1's: "Label keys and values can be no longer than 64 characters
(Unicode codepoints), can only contain lowercase letters, numeric characters, underscores and
dashes. International characters are allowed." Keys are not empty and start with a lowercase letter
(Resource Manager's label requirements: cloud.google.com/resource-manager/docs/labels-overview);
keys under `aiplatform.googleapis.com/` are the system's; at most 64 labels.
"""

from trainer.errors import PipelineError

MAX_CHARACTERS = 64
MAX_LABELS = 64


def _allowed(text):
  """Lowercase letters (international ones too: no uppercase form), digits, _ and -."""
  return all(c in '_-' or c.isdigit() or (c.isalpha() and not c.isupper()) for c in text)


def check(labels, flag='--labels'):
  """Raises PipelineError naming the first label that breaks a rule of the module docstring.

  Args:
    labels: {key: value}, both str.
  """
  if len(labels) > MAX_LABELS:
    raise PipelineError('%s: %d labels, the most a job takes is %d.'
                        % (flag, len(labels), MAX_LABELS))
  for key, value in sorted(labels.items()):
    for what, text in (('key', key), ('value', value)):
      if len(text) > MAX_CHARACTERS or not _allowed(text):
        raise PipelineError(
            '%s: label %s %r: keys and values are at most %d lowercase letters, digits, '
            'underscores or dashes (custom_job.proto).' % (flag, what, text, MAX_CHARACTERS))
    if not key or not (key[0].isalpha() and not key[0].isupper()):
      raise PipelineError('%s: label key %r must start with a lowercase letter.' % (flag, key))


def parse(text, flag='--labels'):
  """'team=ml,cost-center=42' -> {'team': 'ml', 'cost-center': '42'}, checked; None for None or ''.

  Raises:
    PipelineError: not KEY=VALUE pairs, a key twice, or a label that breaks the rules.
  """
  if not text:
    return None
  labels = {}
  for pair in filter(None, (p.strip() for p in text.split(','))):  # 'a=b,' as gcloud takes it
    key, sep, value = pair.partition('=')
    if not sep:
      raise PipelineError('%s=%s: give KEY=VALUE pairs separated by commas (e.g. '
                          '%s=team=vision,cost-center=cc42).' % (flag, text, flag))
    if key.strip() in labels:
      raise PipelineError('%s: label key %r given twice.' % (flag, key.strip()))
    labels[key.strip()] = value.strip()
  check(labels, flag)
  return labels
