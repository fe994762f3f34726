"""`python -m trainer.main --help`: the pipeline's own flags, grouped as `flags.run_flags` defines
them, each with its default. absl's and TensorFlow's own flags (--v, --logtostderr, --flagfile,
...) stay out of it; `--helpfull` still lists everything, in absl's format.
"""

from absl import flags

# What absl's short help answers to (absl.app's --help, -h, -?, --helpshort).
HELP_ARGS = frozenset(['--help', '-help', '-h', '-?', '--helpshort', '-helpshort'])
_WIDTH = 100


def wants_help(argv):
  """True when `argv` (sys.argv, program first) asks for the short help before any `--`."""
  for arg in argv[1:]:
    if arg == '--':
      return False
    if arg in HELP_ARGS:
      return True
  return False


def render(usage, groups, flag_values=flags.FLAGS):
  """The --help text.

  Args:
    usage: the command's usage paragraph (its module docstring).
    groups: [(title, [flag name, ...]), ...] as `run_flags.define_run_flags()` returns.
    flag_values: the FlagValues holding those flags.

  Returns:
    str: the usage, then one block per group: `--name: help` and `(default: value)` per flag,
    wrapped at 100 columns.
  """
  lines = [usage.strip(), '']
  for title, names in groups:
    lines.append(title + ':')
    for name in names:
      lines.append(_flag_text(flag_values[name]))
    lines.append('')
  lines.append('Every flag, absl\'s and TensorFlow\'s too: --helpfull. Guide and recipes: '
               'docs/training.md.')
  return '\n'.join(lines) + '\n'


def _flag_text(flag):
  """One flag as absl's --helpfull writes it: `--[no]name` for booleans, the help (an enum's
  help already starts with its <choices>), then its default when it has one."""
  name = ('--[no]%s' if flag.boolean else '--%s') % flag.name
  text = '%s: %s' % (name, flag.help)
  if flag.default_as_str is not None:
    text += '\n(default: %s)' % flag.default_as_str
  return flags.text_wrap(text, length=_WIDTH, indent='      ', firstline_indent='  ')
