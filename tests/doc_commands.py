"""Reads the commands of the docs' fenced shell blocks and checks them against the real CLI and
Makefile (tests/test_docs.py): each `python -m trainer.X` / `tpu-pipeline-*` flag must be one the
command defines, its sub-command one it knows; each `make` target and VAR=value must exist.

What is read: fenced blocks (``` or ~~~) whose language is bash, sh, shell, console or none.
Backslash continuations are joined, `# comments` dropped, a leading `$ ` prompt stripped (in a
console block only the `$ ` lines are commands, the rest is output), `$(...)` and `...` stand
for a value, and a line is split into its commands at `&&`, `||`, `;`, `|` and `&`.
A block is illustrative only (an output, a template with placeholders such as `...` or SOURCE)
when the nearest non-blank line above its fence is `<!-- illustrative -->` (a reason may follow
the word, e.g. `<!-- illustrative: the output -->`); it is not checked. Commands of other tools
(gcloud, pip, tensorboard, git...) are not checked.

What the CLI and the Makefile define is read by tests/doc_specs.py.
"""

import collections
import difflib
import re
import shlex

SHELL_LANGUAGES = ('', 'bash', 'sh', 'shell', 'console', 'shell-session', 'zsh')
ILLUSTRATIVE = re.compile(r'^\s*<!--\s*illustrative\b.*-->\s*$')
# trainer.main renames AI Platform's --job-dir to --job_dir (trainer/main.py _job_dir_spelling).
FLAG_SPELLINGS = {'trainer.main': {'job-dir': 'job_dir'}}
# Words that run the command that follows them.
WRAPPERS = ('time', 'nohup', 'exec', 'env', 'sudo', 'nice', 'command')
WRAPPER_SCRIPTS = ('netns-run', 'gcs-sandbox')

_FENCE = re.compile(r'^(\s*)(`{3,}|~{3,})\s*([^\s`{]*)')
_PYTHON = re.compile(r'^(?:.*/)?python(?:3(?:\.\d+)?)?$')
_ASSIGNMENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*=')
_SUBSTITUTION = re.compile(r'\$\([^()]*\)|`[^`]*`')
_NUMBER = re.compile(r'^-?\d+(\.\d*)?$')

Command = collections.namedtuple('Command', 'line text program args')
Problem = collections.namedtuple('Problem', 'path line command message')


def format_problem(problem):
  return '%s:%d: %s\n    %s' % (problem.path, problem.line, problem.message, problem.command)


# --- The docs' commands -------------------------------------------------------------------------

def shell_blocks(text):
  """(line of the fence, language, [(line number, text)]) of each fenced block of markdown
  `text`, except the blocks marked illustrative and those in another language."""
  lines = text.split('\n')
  blocks = []
  above = ''  # the last non-blank line above line i
  i = 0
  while i < len(lines):
    match = _FENCE.match(lines[i])
    if not match:
      above = lines[i] if lines[i].strip() else above
      i += 1
      continue
    fence, language = match.group(2), match.group(3).lower()
    start = i
    body = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith(fence):
      body.append((i + 1, lines[i]))
      i += 1
    if language in SHELL_LANGUAGES and not ILLUSTRATIVE.match(above):
      blocks.append((start + 1, language, body))
    above = fence
    i += 1  # past the closing fence
  return blocks


def _logical_lines(body, console):
  """(line number, text) of each shell line of a block: continuations joined, a `$ ` prompt
  stripped; in a console block, the lines without a prompt (the output) left out."""
  logical = []
  pending = None
  for number, line in body:
    if pending is not None:
      pending = (pending[0], pending[1] + ' ' + line.strip())
    else:
      stripped = line.strip()
      if stripped.startswith('$ ') or stripped == '$':
        stripped = stripped[1:].strip()
      elif console or stripped.startswith('#'):
        continue  # output, or a comment (which a trailing backslash does not continue)
      pending = (number, stripped)
    text = pending[1]
    if (len(text) - len(text.rstrip('\\'))) % 2 == 1:  # ends in an unescaped backslash
      pending = (pending[0], text[:-1].rstrip())
      continue
    logical.append(pending)
    pending = None
  if pending is not None:
    logical.append(pending)
  return logical


def _words(text):
  """The words of shell line `text` grouped into its simple commands ([[word]]), without
  comments or redirections; `$(...)` becomes one word. Raises ValueError (an open quote)."""
  previous = None
  while previous != text:
    previous, text = text, _SUBSTITUTION.sub('SUBSTITUTION', text)
  lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
  lexer.whitespace_split = True
  commands = [[]]
  tokens = list(lexer)
  i = 0
  while i < len(tokens):
    token = tokens[i]
    if token and all(c in '();<>|&' for c in token):
      if '<' in token or '>' in token:  # a redirection: drop it and its target (file or fd)
        if commands[-1] and commands[-1][-1].isdigit():
          commands[-1].pop()  # the 2 of 2>
        i += 2
        continue
      commands.append([])
    else:
      commands[-1].append(token)
    i += 1
  return [words for words in commands if words]


def commands(text, console_scripts):
  """The checked commands of markdown `text`: [Command] with program `make` or a trainer module
  (`console_scripts` maps a script name to its module), and [(line, text)] of the shell lines
  that cannot be split into words."""
  found = []
  unparsed = []
  for _, language, body in shell_blocks(text):
    for line, shell_text in _logical_lines(body, console=language in ('console',
                                                                      'shell-session')):
      try:
        simple_commands = _words(shell_text)
      except ValueError:
        unparsed.append((line, shell_text))
        continue
      for words in simple_commands:
        program, args = _program(words, console_scripts)
        if program:
          found.append(Command(line, shell_text, program, args))
  return found, unparsed


def _program(words, console_scripts):
  """(program, its arguments) of one simple command: a trainer module, `make`, or (None, None)
  for another tool."""
  while words and (_ASSIGNMENT.match(words[0]) or words[0] in WRAPPERS
                   or words[0].endswith(WRAPPER_SCRIPTS)):
    words = words[1:]
  if not words:
    return None, None
  first, rest = words[0], words[1:]
  if first == 'make' or first.endswith('/make'):
    return 'make', rest
  if first in console_scripts:
    return console_scripts[first], rest
  if not _PYTHON.match(first):
    return None, None
  i = 0
  while i < len(rest):
    option = rest[i]
    if option == '-m' and i + 1 < len(rest):
      module = rest[i + 1]
      return (module, rest[i + 2:]) if module.split('.')[0] == 'trainer' else (None, None)
    if option.startswith('-m') and len(option) > 2:
      module = option[2:]
      return (module, rest[i + 1:]) if module.split('.')[0] == 'trainer' else (None, None)
    if option in ('-W', '-X'):
      i += 2
    elif option.startswith('-') and option != '-c':
      i += 1
    else:
      break  # a script or -c: not a trainer command
  return None, None


# --- The checks ---------------------------------------------------------------------------------

def check_markdown(path, text, cli, makefile, console_scripts):
  """[Problem] of the commands of markdown `text` (named `path` in the problems): `cli` maps a
  trainer module to its CliSpec, `makefile` is the Makefile's MakefileSpec."""
  found, unparsed = commands(text, console_scripts)
  problems = [Problem(path, line, shell_text, 'cannot split this line into words (an open '
                      'quote?); mark the block <!-- illustrative --> if it is not a command')
              for line, shell_text in unparsed
              if re.search(r'\btrainer\.|tpu-pipeline-|\bmake\b', shell_text)]
  for command in found:
    if command.program == 'make':
      messages = check_make(command.args, makefile)
    elif command.program in cli:
      messages = check_trainer(command.program, command.args, cli)
    else:
      messages = ['python -m %s is not a command of this project (%s)'
                  % (command.program, ', '.join(sorted(cli)))]
    problems.extend(Problem(path, command.line, command.text, m) for m in messages)
  return sorted(problems, key=lambda p: p.line)


def _close(word, candidates):
  match = difflib.get_close_matches(word, list(candidates), n=1)
  return match[0] if match else None


def _did_you_mean(word, candidates, prefix=''):
  match = _close(word, candidates)
  return ' (did you mean %s%s?)' % (prefix, match) if match else ''


def check_trainer(module, args, cli, forwarded=False):
  """Messages about `args` of `python -m module`: unknown flags, a wrong or missing sub-command,
  unexpected arguments. trainer.submit's arguments after `--` are checked as trainer.main's."""
  spec = cli[module]
  spellings = FLAG_SPELLINGS.get(module, {})
  who = '%s%s' % (module, ' (after --, which trainer.submit forwards)' if forwarded else '')
  messages = []
  positional = []
  i = 0
  while i < len(args):
    token = args[i]
    i += 1
    if token == '...':
      continue
    if token == '--':
      if module == 'trainer.submit' and 'trainer.main' in cli:
        messages.extend(check_trainer('trainer.main', args[i:], cli, forwarded=True))
      else:
        positional.extend(args[i:])
      break
    if not token.startswith('-') or token == '-' or _NUMBER.match(token):
      positional.append(token)
      continue
    name, has_value = token.lstrip('-').split('=', 1)[0], '=' in token
    name = spellings.get(name, name)
    if name in spec.flags:
      if not spec.flags[name] and not has_value:
        i += 1  # --flag VALUE: the next word is its value
      continue
    if name.startswith('no') and spec.flags.get(name[2:]) and not has_value:
      continue  # --noflag of a boolean flag
    candidates = list(spec.flags) + (['no' + n for n, boolean in spec.flags.items() if boolean]
                                     if name.startswith('no') else [])
    messages.append('%s has no flag %s%s' % (
        who, token.split('=', 1)[0], _did_you_mean(name, candidates, prefix='--')))
  if spec.subcommands:
    if not positional:
      messages.append('%s needs a sub-command: one of %s' % (who, ', '.join(spec.subcommands)))
    elif positional[0] not in spec.subcommands:
      messages.append('%s has no sub-command %s%s; one of %s' % (
          who, positional[0], _did_you_mean(positional[0], spec.subcommands),
          ', '.join(spec.subcommands)))
    positional = positional[1:]
  if positional:
    messages.append('%s takes no argument %s (a flag value needs --flag=VALUE or a flag that '
                    'takes one)' % (who, ' '.join(positional)))
  return messages


def check_make(args, makefile):
  """Messages about `make args`: targets the Makefile lacks, VAR=value of variables it never
  uses. `make -f FILE` / `make -C DIR` (another Makefile) is not checked."""
  messages = []
  i = 0
  while i < len(args):
    token = args[i]
    i += 1
    if token == '...':
      continue
    if token.startswith('--'):
      if token.split('=')[0] in ('--file', '--makefile', '--directory'):
        return []
      continue
    if token.startswith('-') and len(token) > 1:
      if token[1] in 'fC':
        return []
      if token in ('-I', '-o', '-W') or (token in ('-j', '-l') and i < len(args)
                                          and _NUMBER.match(args[i])):
        i += 1
      continue
    if '=' in token:
      name = token.split('=', 1)[0].rstrip(':+?!').strip()
      if name not in makefile.variables:
        messages.append('the Makefile has no variable %s%s' % (
            name, _did_you_mean(name, makefile.variables)))
    elif not (token in makefile.targets
              or any(p.match(token) for p in makefile.target_patterns)):
      messages.append('the Makefile has no target %s%s' % (
          token, _did_you_mean(token, makefile.targets)))
  return messages
