"""`capacity-launcher completion bash|zsh|fish`: a completion script written from the parser
itself, so every command, flag and choice the CLI has is completed, and nothing it lacks; and
the names of what is stored, asked of the deployment as the user types, as kubectl's completion
does: after `get`, `describe` or `delete` and a TYPE, the names of that TYPE (`get TYPE -o name`,
with the --stack-name, --region and --local-file already typed); after `status`, the requests'
ids. A deployment that does not answer completes no names, silently.

bash: `eval "$(capacity-launcher completion bash)"` (in ~/.bashrc). zsh: the same with `zsh`,
which loads zsh's bash-completion compatibility first. fish:
`capacity-launcher completion fish | source` (or into ~/.config/fish/completions/).
"""

from __future__ import annotations

import argparse
import shlex

FUNCTION = "_capacity_launcher"
PROGRAM = "capacity-launcher"
# Commands whose word after TYPE is a NAME of that TYPE; `status`'s first word is a request's id.
NAMED_AFTER_TYPE = ("get", "describe", "delete")
REQUEST_IDS = ("status",)
# The flags that say which deployment to ask for names.
DEPLOYMENT_FLAGS = ("--stack-name", "--region", "--local-file")
# Flags (by dest) whose value is a file or folder: fish completes paths there, nowhere else.
_PATHS = ("filename", "local_file", "template", "directory", "env_vars", "event", "examples")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _words(parser: argparse.ArgumentParser) -> list[str]:
    """What may follow a command: its subcommands, flags and positional choices."""
    words = list(_subcommands(parser))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        words += [o for o in action.option_strings if o.startswith("--")]
        if not action.option_strings and action.choices:
            words += [str(c) for c in action.choices]
    return words


def completions(root: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Words by the command path typed so far ("" for none, "get", "local up")."""
    found = {"": _words(root)}
    for name, command in _subcommands(root).items():
        found[name] = _words(command)
        for sub, nested in _subcommands(command).items():
            found[f"{name} {sub}"] = _words(nested)
    return found


def script(root: argparse.ArgumentParser, shell: str) -> str:
    if shell == "fish":
        return fish(root)
    table = completions(root)
    nested = sorted({path.split(" ")[0] for path in table if " " in path})
    cases = "\n".join(
        f"    {shlex.quote(path)}) words={shlex.quote(' '.join(words))} ;;"
        for path, words in table.items()
        if path
    )
    body = f"""{FUNCTION}_names() {{
  # The names of TYPE $1 in the deployment the command line names, one per word.
  local i flags=() name
  for ((i = 1; i < ${{#COMP_WORDS[@]}} - 1; i++)); do
    case "${{COMP_WORDS[i]}}" in
      {"|".join(DEPLOYMENT_FLAGS)}) flags+=("${{COMP_WORDS[i]}}" "${{COMP_WORDS[i+1]}}") ;;
    esac
  done
  for name in $({PROGRAM} get "$1" -o name "${{flags[@]}}" 2>/dev/null); do
    printf '%s ' "${{name#*/}}"
  done
}}
{FUNCTION}() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} path="" words
  if [ "$COMP_CWORD" -gt 1 ]; then
    path=${{COMP_WORDS[1]}}
    case " {" ".join(nested)} " in
      *" $path "*) [ "$COMP_CWORD" -gt 2 ] && path="$path ${{COMP_WORDS[2]}}" ;;
    esac
  fi
  if [[ "$cur" != -* ]]; then
    case "$path" in
      {"|".join(NAMED_AFTER_TYPE)})
        if [ "$COMP_CWORD" -eq 3 ] && [[ "${{COMP_WORDS[2]}}" != -* ]]; then
          COMPREPLY=($(compgen -W "$({FUNCTION}_names "${{COMP_WORDS[2]}}")" -- "$cur"))
          return
        fi ;;
      {"|".join(REQUEST_IDS)})
        if [ "$COMP_CWORD" -eq 2 ]; then
          COMPREPLY=($(compgen -W "$({FUNCTION}_names requests)" -- "$cur"))
          return
        fi ;;
    esac
  fi
  case "$path" in
    "") words={shlex.quote(" ".join(table[""]))} ;;
{cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F {FUNCTION} {PROGRAM}
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def fish(root: argparse.ArgumentParser) -> str:
    """fish's completions: one `complete` line per command, flag and choice, and the names."""
    lines = [
        f"# {PROGRAM} completion for fish: `{PROGRAM} completion fish | source`",
        f"complete -c {PROGRAM} -f",
        f"""function __{FUNCTION}_names --argument-names type
    set -l words (commandline -opc)
    set -l flags
    for i in (seq 2 (math (count $words) - 1))
        if contains -- $words[$i] {" ".join(DEPLOYMENT_FLAGS)}
            set -a flags $words[$i] $words[(math $i + 1)]
        end
    end
    {PROGRAM} get $type -o name $flags 2>/dev/null | string replace -r '^[^/]*/' ''
end""",
        f"""function __{FUNCTION}_positional --argument-names position
    # Whether the word being typed is the command line's `position`th word that is not a flag.
    set -l words (commandline -opc)
    set -l found 0
    for word in $words[2..-1]
        string match -q -- '-*' $word; or set found (math $found + 1)
    end
    test $found -eq $position
end""",
        f"""function __{FUNCTION}_type
    set -l words (commandline -opc)
    for word in $words[3..-1]
        string match -q -- '-*' $word; or begin; echo $word; return; end
    end
end""",
    ]
    commands = _subcommands(root)
    top = f"not __fish_seen_subcommand_from {' '.join(commands)}"
    for name, command in commands.items():
        lines.append(_fish_line(top, name, command.description or _help_of(root, name)))
        seen = f"__fish_seen_subcommand_from {name}"
        lines += _fish_arguments(seen, command)
        for sub, nested in _subcommands(command).items():
            lines.append(_fish_line(f"{seen}; and __{FUNCTION}_positional 1", sub, ""))
            lines += _fish_arguments(f"{seen}; and __fish_seen_subcommand_from {sub}", nested)
    types = f"__fish_seen_subcommand_from {' '.join(NAMED_AFTER_TYPE)}"
    lines.append(
        f"complete -c {PROGRAM} -n {shlex.quote(f'{types}; and __{FUNCTION}_positional 2')} "
        f"-a {shlex.quote(f'(__{FUNCTION}_names (__{FUNCTION}_type))')}"
    )
    ids = f"__fish_seen_subcommand_from {' '.join(REQUEST_IDS)}"
    lines.append(
        f"complete -c {PROGRAM} -n {shlex.quote(f'{ids}; and __{FUNCTION}_positional 1')} "
        f"-a {shlex.quote(f'(__{FUNCTION}_names requests)')}"
    )
    return "\n".join(lines) + "\n"


def _help_of(root: argparse.ArgumentParser, name: str) -> str:
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def _fish_line(condition: str, word: str, description: str) -> str:
    described = f" -d {shlex.quote(description)}" if description else ""
    return f"complete -c {PROGRAM} -n {shlex.quote(condition)} -a {shlex.quote(word)}{described}"


def _fish_arguments(condition: str, parser: argparse.ArgumentParser) -> list[str]:
    """A command's flags (with their choices), and its first positional's choices."""
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or "-h" in action.option_strings:
            continue
        if not action.option_strings:
            if action.choices:
                choices = " ".join(str(c) for c in action.choices)
                lines.append(_fish_line(f"{condition}; and __{FUNCTION}_positional 1", choices, ""))
            continue
        spelled = [
            f"-l {o[2:]}" if o.startswith("--") else f"-s {o[1:]}" for o in action.option_strings
        ]
        if action.choices:
            value = f" -xa {shlex.quote(' '.join(map(str, action.choices)))}"
        elif action.nargs == 0:
            value = ""
        else:  # a path (-rF: files), or another value (-x: no files)
            value = " -rF" if action.dest in _PATHS else " -x"
        help_text = f" -d {shlex.quote(action.help)}" if action.help else ""
        lines.append(
            f"complete -c {PROGRAM} -n {shlex.quote(condition)} {' '.join(spelled)}"
            f"{value}{help_text}"
        )
    return lines
