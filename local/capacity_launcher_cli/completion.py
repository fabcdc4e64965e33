"""`capacity-launcher completion bash|zsh`: a completion script written from the parser itself,
so every command, flag and choice the CLI has is completed, and nothing it lacks.

bash: `eval "$(capacity-launcher completion bash)"` (in ~/.bashrc). zsh: the same with `zsh`,
which loads zsh's bash-completion compatibility first.
"""

from __future__ import annotations

import argparse
import shlex

FUNCTION = "_capacity_launcher"


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
    table = completions(root)
    nested = sorted({path.split(" ")[0] for path in table if " " in path})
    cases = "\n".join(
        f"    {shlex.quote(path)}) words={shlex.quote(' '.join(words))} ;;"
        for path, words in table.items()
        if path
    )
    body = f"""{FUNCTION}() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} path="" words
  if [ "$COMP_CWORD" -gt 1 ]; then
    path=${{COMP_WORDS[1]}}
    case " {" ".join(nested)} " in
      *" $path "*) [ "$COMP_CWORD" -gt 2 ] && path="$path ${{COMP_WORDS[2]}}" ;;
    esac
  fi
  case "$path" in
    "") words={shlex.quote(" ".join(table[""]))} ;;
{cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F {FUNCTION} capacity-launcher
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body
