"""The docs stay true to the CLI and the Makefile: every `python -m trainer.*`, `tpu-pipeline-*` and
`make` command in a fenced shell block of the *.md files (repository root and docs/) uses only
flags its command defines (read from the command's own --helpxml), one of its sub-commands, and
Makefile targets and variables that exist. A block whose fence follows `<!-- illustrative -->` is
not checked (tests/doc_commands.py tells what is read and how).

Runs on one runtime: the commands' flags are the same on both, so the TF 1.15 run skips it.
"""

import glob
import os
import re
import subprocess
import textwrap

import pytest

import doc_commands
import doc_specs
from helpers import REPO
import keras_runs

pytestmark = pytest.mark.one_runtime("the docs' commands: the CLI's flags and the Makefile "
                                     'are the same for both runtimes')

DOCS = sorted(glob.glob(os.path.join(REPO, '*.md'))) + sorted(
    glob.glob(os.path.join(REPO, 'docs', '*.md')))


@pytest.fixture(scope='module')
def scripts():
  """setup.py's console scripts: script name -> trainer module."""
  return doc_specs.console_scripts(os.path.join(REPO, 'setup.py'))


@pytest.fixture(scope='module')
def cli(scripts):
  """Module -> its flags and sub-commands, each command's --helpxml run once, when first needed."""
  return doc_specs.CliSpecs(REPO, scripts, python_of={
      module: keras_runs.KERAS_PYTHON for module in keras_runs.KERAS_COMMANDS})


@pytest.fixture(scope='module')
def makefile():
  """The Makefile's targets and variables."""
  return doc_specs.read_makefile(os.path.join(REPO, 'Makefile'))


def _check(text, cli, makefile, scripts, path='doc.md'):
  return doc_commands.check_markdown(path, textwrap.dedent(text), cli, makefile, scripts)


def test_the_docs_are_found():
  """The parametrized check below has its files: README.md and the guides in docs/."""
  names = [os.path.relpath(d, REPO) for d in DOCS]
  assert 'README.md' in names and any(n.startswith('docs' + os.sep) for n in names), names


@pytest.mark.parametrize('doc', DOCS, ids=lambda d: os.path.relpath(d, REPO))
def test_doc_commands_use_real_flags_targets_and_variables(doc, cli, makefile, scripts):
  """Each command of the file's shell blocks runs as written as far as its arguments go: no flag
  its command lacks, no sub-command it does not know, no Makefile target or variable that does
  not exist. A failure names the file, the line, the command and the likely intended flag."""
  with open(doc, encoding='utf-8') as f:
    text = f.read()
  problems = doc_commands.check_markdown(os.path.relpath(doc, REPO), text, cli, makefile,
                                         scripts)
  if problems:
    pytest.fail('%d command(s) of %s do not match the CLI or the Makefile (fix the doc, or mark '
                'a block that only illustrates with <!-- illustrative --> above its fence):\n%s'
                % (len(problems), os.path.relpath(doc, REPO),
                   '\n'.join(doc_commands.format_problem(p) for p in problems)),
                pytrace=False)


def test_checker_reports_exactly_the_wrong_flags_targets_and_variables(cli, makefile, scripts):
  """The check can fail: on a synthetic page it reports each misspelled flag (with the flag meant),
  a wrong sub-command, a misspelled flag forwarded by trainer.submit, an unknown make target and
  an unknown make variable, at their lines, and nothing else; the illustrative block, whose
  commands are just as wrong, is skipped, and so are the commands of other tools."""
  page = """\
      # A page

      ```bash
      python -m trainer.main --data_dir=DIR --train_epoch=3 --model_dir=DIR
      make trian
      make train MODLE=cnn
      python -m trainer.prepare fashion-mnist --output_dir=DIR
      python -m trainer.submit --job_dir=gs://BUCKET/j -- --data_dir=gs://BUCKET/d --resnet_dept=18
      tpu-pipeline-benchmark model --batch_sizes=8
      gcloud ai-platform jobs submit training --not-ours
      ```

      <!-- illustrative -->
      ```bash
      python -m trainer.main --not_a_flag=1 ...
      make no_such_target NO_SUCH_VARIABLE=1
      ```

      ```json
      {"python -m trainer.main --json_is_not_shell": 1}
      ```
      """
  problems = _check(page, cli, makefile, scripts)
  assert [(p.path, p.line, p.message) for p in problems] == [
      ('doc.md', 4, 'trainer.main has no flag --train_epoch (did you mean --train_epochs?)'),
      ('doc.md', 5, 'the Makefile has no target trian (did you mean train?)'),
      ('doc.md', 6, 'the Makefile has no variable MODLE (did you mean MODEL?)'),
      ('doc.md', 7, 'trainer.prepare has no sub-command fashion-mnist (did you mean '
                    'fashion_mnist?); one of imagenet, image_folder, fashion_mnist, text, '
                    'rotten_tomatoes, photos, arrays'),
      ('doc.md', 8, 'trainer.main (after --, which trainer.submit forwards) has no flag '
                    '--resnet_dept (did you mean --resnet_depth?)'),
      ('doc.md', 9, 'trainer.benchmark has no flag --batch_sizes (did you mean --batch_size?)'),
  ]
  assert problems[0].command == 'python -m trainer.main --data_dir=DIR --train_epoch=3 ' \
                                '--model_dir=DIR'
  assert 'doc.md:4: trainer.main has no flag --train_epoch' in doc_commands.format_problem(
      problems[0])
  # The illustrative block is skipped, not unread: without its marker it is checked.
  unmarked = page.replace('<!-- illustrative -->', '')
  lines = [p.line for p in _check(unmarked, cli, makefile, scripts)]
  assert lines == [4, 5, 6, 7, 8, 9, 15, 16, 16]


def test_checker_reads_shell_syntax_without_false_alarms(cli, makefile, scripts):
  """What a doc may write and still be right is accepted: continuations, comments (one ending in
  a backslash included), prompts, compound lines, $(...), values that look like flags
  (--beam_option=--x, --beam_option --x), separate values, --noflag, --job-dir, absl's own flags,
  `...`, pattern targets, options of make. Each of these commands is found (none is silently
  skipped) and none is reported."""
  page = """\
      ```console
      $ python -m trainer.main --helpfull | less
      output: python -m trainer.main --not_a_command_but_output
      $ make
      ```

      ```sh
      # a comment, not continued by its backslash: python -m trainer.main --commented_out \\
      $ make train MODEL=cnn SEED=3 && make test  # make bench --not-checked
      .venv-tf2/bin/python -m trainer.main --data_dir ~/data --model_dir=/tmp/$(date +%s) \\
          --nouse_tpu --nocolor_distortion --job-dir=gs://BUCKET/j --lr_decay_epochs=2.5,7 ...
      python3 -u -m trainer.prepare imagenet --source_dir=gs://B/in --output_dir gs://B/out \\
          --beam_option=--max_num_workers=32 --beam_option --machine_type=n1-standard-4 \\
          --input a.csv,b.csv 2>&1 | tee log.txt; echo done
      tpu-pipeline-train --model=cnn --use_tpu=false > out.json
      python -m trainer.benchmark model --batch_size={8,16} --flagfile=flags.txt -v 1
      tpu-pipeline-submit --job_name=r_$(date +%Y%m%d_%H%M%S) --dry_run -- --train_epochs=1
      make -j 2 .venv-tf2/.bench data/fashion_mnist/dataset.json clean-runs
      ```
      """
  found, unparsed = doc_commands.commands(textwrap.dedent(page), scripts)
  assert unparsed == []
  assert [(c.line, c.program) for c in found] == [
      (2, 'trainer.main'), (4, 'make'), (9, 'make'), (9, 'make'), (10, 'trainer.main'),
      (12, 'trainer.prepare'), (15, 'trainer.main'), (16, 'trainer.benchmark'),
      (17, 'trainer.submit'), (18, 'make')]
  assert found[5].args[:4] == ['imagenet', '--source_dir=gs://B/in', '--output_dir', 'gs://B/out']
  assert _check(page, cli, makefile, scripts) == []


def test_cli_specs_come_from_the_commands_themselves(cli, scripts):
  """Every console script of setup.py is one of the checked commands, and each command's flags
  are read from its --helpxml: absl's own flags included, sub-commands from its main()."""
  assert set(scripts.values()) == {'trainer.main', 'trainer.prepare', 'trainer.submit',
                                   'trainer.benchmark', 'trainer.advise', 'trainer.export_keras',
                                   'trainer.train_keras', 'trainer.train_torch'}
  assert {'helpfull', 'use_tpu', 'job_dir', 'train_epochs'} <= set(cli['trainer.main'].flags)
  assert cli['trainer.main'].flags['use_tpu'] and not cli['trainer.main'].flags['data_dir']
  assert cli['trainer.main'].subcommands is None
  assert 'fashion_mnist' in cli['trainer.prepare'].subcommands
  assert cli['trainer.benchmark'].subcommands == ('model', 'profile', 'input', 'conv', 'overhead')
  assert 'scale_tier' in cli['trainer.submit'].flags
  assert {'targets', 'road', 'resnet_depth'} <= set(cli['trainer.advise'].flags)
  # The Keras runtime's commands, read from that runtime (they do not import under TF 2.15).
  assert {'check_predictions', 'use_moving_average'} <= set(cli['trainer.export_keras'].flags)
  assert cli['trainer.export_keras'].flags['use_moving_average'] is True
  assert cli['trainer.train_keras'].flags['cpu_replicas'] is False
  assert {'data_parallel', 'save_checkpoints_steps'} <= set(cli['trainer.train_keras'].flags)
  assert {'init_model', 'device'} <= set(cli['trainer.train_torch'].flags)


def _anchor(heading):
  """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
  text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
  return text.replace(' ', '-')


def _anchors(path):
  with open(path, encoding='utf-8') as f:
    text = re.sub(r'```.*?```', '', f.read(), flags=re.S)  # a '# comment' in a block is no heading
  return {_anchor(m.group(1)) for m in re.finditer(r'^#+ (.*)$', text, re.M)}


@pytest.mark.parametrize('doc', DOCS, ids=lambda d: os.path.relpath(d, REPO))
def test_doc_links_reach_a_file_and_heading(doc):
  """Every relative link of the file names a file of the repository and, with #anchor, a heading
  of that file, so a renamed guide or section cannot leave a dead link."""
  with open(doc, encoding='utf-8') as f:
    text = re.sub(r'```.*?```', '', f.read(), flags=re.S)
  dead = []
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'[a-z]+:', target):
      continue  # https:, mailto:
    path, _, anchor = target.partition('#')
    full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
    if not os.path.exists(full):
      dead.append('%s: no file %s' % (target, os.path.relpath(full, REPO)))
    elif anchor and full.endswith('.md') and anchor not in _anchors(full):
      dead.append('%s: no heading #%s in %s' % (target, anchor, os.path.relpath(full, REPO)))
  assert not dead, '%s has dead links:\n%s' % (os.path.relpath(doc, REPO), '\n'.join(dead))


def test_readme_reaches_every_guide_in_one_click():
  """README.md is the front door: it links to every guide in docs/ and to BUILD.md."""
  with open(os.path.join(REPO, 'README.md'), encoding='utf-8') as f:
    readme = f.read()
  linked = {os.path.normpath(t.partition('#')[0]) for t in re.findall(r'\]\(([^)#\s]+)', readme)}
  guides = {os.path.relpath(d, REPO) for d in DOCS if os.sep + 'docs' + os.sep in d}
  assert guides and not guides - linked, sorted(guides - linked)
  assert 'BUILD.md' in linked and len(readme.splitlines()) <= 200


def test_make_help_lists_every_target():
  """Every target of the Makefile's .PHONY list has its line in `make help`."""
  with open(os.path.join(REPO, 'Makefile'), encoding='utf-8') as f:
    phony = re.search(r'^\.PHONY:(.*)$', f.read(), re.M).group(1).split()
  shown = subprocess.run(['make', '--no-print-directory', 'help'], cwd=REPO,
                         stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
  missing = [t for t in phony if not re.search(r'^make %s\b' % re.escape(t), shown, re.M)]
  assert not missing, 'make help does not list: %s' % missing


_RECIPE_ROW = re.compile(r'^\| `(?:make train|MODEL=(\w+))` \|(.*)$', re.M)
_EPOCHS = re.compile(r'(\d+(?:\.\d+)?) epochs? \(([\d,]+) steps')


def _makefile_train_flags(text):
  """{model: {flag: value}} of the Makefile's TRAIN_FLAGS_<model> (make train's recipes)."""
  text = text.replace('\\\n', ' ')
  recipes = {}
  for model, flags in re.findall(r'^TRAIN_FLAGS_(\w+) := (.*)$', text, re.M):
    recipes[model] = dict(re.findall(r'--(\w+)=(\S+)', flags))
  return recipes


def _recipe_rows(doc_text):
  """(model or '' for make train's, the rest of the row) of the recipe table's rows: the rows
  of `make train` / `MODEL=...` that state epochs."""
  return [(model, row) for model, row in _RECIPE_ROW.findall(doc_text) if _EPOCHS.search(row)]


def step_count_problems(doc_text, makefile_text, num_train_examples):
  """Each recipe row of docs/training.md's table that states 'N epochs (M steps' where M is not
   the steps `trainer.main` runs for make train's flags of that model
   (models.recipes.steps_of_epochs), or where N is not the Makefile's --train_epochs: a list of
   messages."""
  from trainer.models import recipes  # pylint: disable=g-import-not-at-top
  train_flags = _makefile_train_flags(makefile_text)
  problems = []
  for model, row in _recipe_rows(doc_text):
    model = model or 'resnet'
    flags = train_flags[model]
    for epochs, steps in _EPOCHS.findall(row):
      expected = recipes.steps_of_epochs(float(flags['train_epochs']),
                                         num_train_examples[model],
                                         int(flags['train_batch_size']))
      if float(epochs) != float(flags['train_epochs']):
        problems.append('%s: %s epochs documented, the Makefile trains %s'
                        % (model, epochs, flags['train_epochs']))
      elif int(steps.replace(',', '')) != expected:
        problems.append('%s: %s steps documented, make train runs %d' % (model, steps, expected))
  return problems


@pytest.fixture(scope='module')
def recipe_examples(fashion_mnist_dir):
  """make train's training-split sizes by model: Fashion-MNIST's from its dataset.json, the
  Rotten Tomatoes snippets' from the converter's own split (no TFRecords written)."""
  from trainer.data import dataset_json  # pylint: disable=g-import-not-at-top
  from trainer.prepare import rotten_tomatoes  # pylint: disable=g-import-not-at-top
  from trainer.prepare import text_dataset  # pylint: disable=g-import-not-at-top
  images = dataset_json.read(fashion_mnist_dir)['num_train_examples']
  train, _ = text_dataset.split_rows(rotten_tomatoes.snippets(rotten_tomatoes.find_corpus()), 0.2,
                                     text_dataset.DEFAULT_SEED)
  return {'resnet': images, 'cnn': images, 'inception_v3': images, 'bilstm': len(train)}


def test_documented_step_counts_are_what_make_train_runs(recipe_examples):
  with open(os.path.join(REPO, 'docs', 'training.md'), encoding='utf-8') as f:
    doc = f.read()
  with open(os.path.join(REPO, 'Makefile'), encoding='utf-8') as f:
    makefile_text = f.read()
  assert len(_recipe_rows(doc)) == 4
  assert step_count_problems(doc, makefile_text, recipe_examples) == []
  # The check fails on a wrong count: the 320 once documented for the BiLSTM (it runs 319).
  wrong = doc.replace('2 epochs (319 steps', '2 epochs (320 steps')
  assert wrong != doc
  assert step_count_problems(wrong, makefile_text, recipe_examples) == [
      'bilstm: 320 steps documented, make train runs 319']
