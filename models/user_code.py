"""A user's own code named on the command line as MODULE:CALLABLE (`--network=`), imported and
checked against the contract it must meet before anything runs.

MODULE is imported with Python's normal rules: from the current directory when the command is
run as `python -m trainer...`, from PYTHONPATH, or from an installed package.
"""

import importlib
import inspect
import re

from trainer.errors import PipelineError

# A dotted module path, a colon, a top-level name of that module.
_SPEC = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$')


def is_spec(value):
  """Whether `value` (str) is spelled MODULE:CALLABLE (nothing is imported)."""
  return bool(_SPEC.match(value or ''))


def load(spec, flag, call_args, call_kwargs, contract, optional=None):
  """The callable `spec` names, checked to accept the contract's arguments.

  Args:
    spec: str, 'package.module:name'.
    flag: the flag that gave it, for messages ('--network').
    call_args, call_kwargs: a sample of the positional and keyword arguments the contract passes;
      the callable's signature must bind them (nothing is called).
    optional: keyword arguments the contract passes only to a callable that names them (dict).
    contract: the contract's signature as text, for messages.

  Returns:
    The callable.

  Raises:
    PipelineError: `spec` is not MODULE:CALLABLE, the module does not import, the name is
      missing or not callable, or its signature cannot take the contract's arguments; one line
      saying what to do.
  """
  if not is_spec(spec):
    raise PipelineError('%s=%s is not MODULE:CALLABLE (for example %s=examples.mobilenet:'
                        'mobilenet).' % (flag, spec, flag))
  module_name, name = spec.split(':')
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise PipelineError(
        '%s=%s: module %s cannot be imported (%s): put the directory that holds %s on '
        'PYTHONPATH, or pip install the package that provides it.'
        % (flag, spec, module_name, e, module_name.split('.')[0]))
  except Exception as e:  # pylint: disable=broad-except  # the user's module raised on import
    raise PipelineError('%s=%s: importing %s raised %s: %s; fix the module.'
                        % (flag, spec, module_name, type(e).__name__, e))
  if not hasattr(module, name):
    raise PipelineError('%s=%s: module %s (%s) has no %r.'
                        % (flag, spec, module_name, getattr(module, '__file__', '?'), name))
  target = getattr(module, name)
  if not callable(target):
    raise PipelineError('%s=%s is a %s, not a callable: name a function %s.'
                        % (flag, spec, type(target).__name__, contract))
  try:
    signature = inspect.signature(target)
    kwargs = dict(call_kwargs, **{name: value for name, value in (optional or {}).items()
                                  if name in signature.parameters})
    signature.bind(*call_args, **kwargs)
  except TypeError as e:
    raise PipelineError('%s=%s takes %s, which cannot be called as %s (%s).'
                        % (flag, spec, _signature(target), contract, e))
  except ValueError:  # no signature to read (a builtin): calling it will tell
    pass
  return target


def _signature(target):
  try:
    return '%s%s' % (getattr(target, '__name__', 'it'), inspect.signature(target))
  except (TypeError, ValueError):
    return repr(target)
