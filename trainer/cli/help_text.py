"""`--help` of every entry point (`trainer.main`, `trainer.prepare`, `trainer.submit`, ...): the
command's own flags, grouped as its flags module defines them (`define_groups`), each with its
default. absl's and TensorFlow's own flags (--v, --logtostderr, --flagfile,
...) stay out of it; `--helpfull` still lists everything, in absl's format.
"""

import sys

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


def define_groups(definers, flag_values=flags.FLAGS):
  """Runs each define function of `definers` ([(title, function), ...]) and returns the groups
  --help shows: [(title, [the names it defined, in order]), ...]."""
  groups = []
  for title, define in definers:
    before = set(flag_values)
    define()
    groups.append((title, [name for name in flag_values if name not in before]))
  return groups


def exit_if_help_asked(argv, usage, groups, guide):
  """Prints `render(usage, groups, guide=guide)` and exits 0 when `argv` asks for --help."""
  if wants_help(argv):
    sys.stdout.write(render(usage, groups, guide=guide))
    sys.exit(0)


def render(usage, groups, flag_values=flags.FLAGS, guide='docs/training.md'):
  """The --help text.

  Args:
    usage: the command's usage paragraph (its module docstring).
    groups: [(title, [flag name, ...]), ...] as `run_flags.define_run_flags()` returns.
    flag_values: the FlagValues holding those flags.
    guide: the doc that explains the command, named on the last line.

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
  lines.append('Every flag, absl\'s and TensorFlow\'s too: --helpfull. Guide: %s.' % guide)
  return '\n'.join(lines) + '\n'


def _flag_text(flag):
  """One flag as absl's --helpfull writes it: `--[no]name` for booleans, the help (an enum's
  help already starts with its <choices>), then its default when it has one."""
  name = ('--[no]%s' if flag.boolean else '--%s') % flag.name
  text = '%s: %s' % (name, flag.help)
  if flag.default_as_str is not None:
    text += '\n(default: %s)' % flag.default_as_str
  return flags.text_wrap(text, length=_WIDTH, indent='      ', firstline_indent='  ')
