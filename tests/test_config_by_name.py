"""The run Config is filled from the flags by name (flags/run_fields.py): every flag of
`trainer.main` has a field of its name in Config, ModelConfig or DataConfig, or says where it
goes instead; every field has a flag of its name, or says where it comes from (dataset.json,
the recipe, the device)."""

import dataclasses

from absl import flags as absl_flags
import pytest

from trainer.data.data_config import DataConfig
from trainer.flags import run_fields
from trainer.flags import run_flags
from trainer.models.model_config import ModelConfig
from trainer.run.run_config import Config

pytestmark = pytest.mark.one_runtime('flag and field names, the same Python code on both')

CONFIGS = (Config, ModelConfig, DataConfig)


def _run_flag_names():
  """The flags `trainer.main` defines (trainer.flags), without absl's own."""
  if 'model' not in absl_flags.FLAGS:
    run_flags.define_run_flags()
  return {flag.name for module, defined in absl_flags.FLAGS.flags_by_module_dict().items()
          if module.startswith('trainer.flags.') for flag in defined}


def _field_names(*classes):
  return {field.name for cls in classes for field in dataclasses.fields(cls)}


def test_every_flag_fills_a_field_of_its_name_or_says_where_it_goes():
  flags = _run_flag_names()
  fields = _field_names(*CONFIGS)
  assert len(flags) > 60
  assert sorted(flags - fields - set(run_fields.NOT_A_FIELD)) == []
  # An entry for a flag that is gone is stale.
  assert sorted(set(run_fields.NOT_A_FIELD) - flags) == []


def test_every_field_has_a_flag_of_its_name_or_says_where_it_comes_from():
  flags = _run_flag_names()
  fields = _field_names(*CONFIGS)
  assert sorted(fields - flags - set(run_fields.NOT_A_FLAG)) == []
  assert sorted(set(run_fields.NOT_A_FLAG) - (fields - flags)) == []

def test_by_name_copies_flags_and_refuses_an_unknown_field():
  @dataclasses.dataclass
  class Small:
    a: int
    b: str = 'default'
    c: int = 0

  flags = type('F', (), {'a': 1, 'c': 5, 'not_a_field': 9})
  assert run_fields.by_name(Small, flags) == Small(a=1, b='default', c=5)
  assert run_fields.by_name(Small, flags, c=7) == Small(a=1, b='default', c=7)
  with pytest.raises(TypeError, match='Small has no field d'):
    run_fields.by_name(Small, flags, d=1)
