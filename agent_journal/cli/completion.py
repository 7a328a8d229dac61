"""`completion bash|zsh|fish`: shell completion scripts, generated from the command table.

Invariant: the scripts list exactly the commands and options of commands.COMMANDS, so they
cannot drift from what argv accepts; they run nothing of ours at completion time.
"""

from __future__ import annotations

from agent_journal.cli.commands import COMMANDS
from agent_journal.core.errors import UsageError

SHELLS = ("bash", "zsh", "fish")


def _next_words() -> dict[str, list[str]]:
    """For each typed prefix of command words ("" for none), the words that may follow."""
    following: dict[str, list[str]] = {}
    for name in COMMANDS:
        words = name.split()
        for i, word in enumerate(words):
            prefix = " ".join(words[:i])
            if word not in following.setdefault(prefix, []):
                following[prefix].append(word)
    return following


def _options(name: str) -> list[str]:
    return [opt.flag for opt in COMMANDS[name].opts] + ["--help"]


def script(shell: str) -> str:
    if shell == "bash":
        return _bash()
    if shell == "zsh":
        # zsh runs bash completion functions through bashcompinit.
        return "autoload -U +X bashcompinit && bashcompinit\n" + _bash()
    if shell == "fish":
        return _fish()
    raise UsageError(f"completion takes one of {', '.join(SHELLS)}, not {shell!r}")


def _bash() -> str:
    cases = []
    for prefix, words in sorted(_next_words().items(), key=lambda kv: -len(kv[0])):
        opts = " ".join(_options(prefix)) if prefix in COMMANDS else ""
        cases.append(f'    "{prefix}") words="{" ".join(words)}"; opts="{opts}";;')
    for name in sorted(COMMANDS, key=len, reverse=True):
        if name not in _next_words():
            cases.append(f'    "{name}") words=""; opts="{" ".join(_options(name))}";;')
    body = "\n".join(cases)
    return f"""# agent-journal completion for bash (eval "$(agent-journal completion bash)")
_agent_journal() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" typed="" w words="" opts=""
  for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
    case "$w" in -*) break;; esac
    typed="${{typed:+$typed }}$w"
  done
  case "$typed" in
{body}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}}
complete -o default -F _agent_journal agent-journal
"""


def _fish() -> str:
    lines = ["# agent-journal completion for fish (agent-journal completion fish | source)",
             "complete -c agent-journal -f"]
    for prefix, words in _next_words().items():
        given = prefix.split()
        cond = ("__fish_use_subcommand" if not given else
                " ; and ".join(f"__fish_seen_subcommand_from {w}" for w in given))
        for word in words:
            lines.append(f"complete -c agent-journal -n '{cond}' -a {word}")
    for name, cmd in COMMANDS.items():
        cond = " ; and ".join(f"__fish_seen_subcommand_from {w}" for w in name.split())
        for opt in cmd.opts:
            help_text = opt.help.replace("'", "").split(". ")[0][:60]
            lines.append(f"complete -c agent-journal -n '{cond}' -l {opt.flag[2:]} "
                         f"-d '{help_text}'")
    return "\n".join(lines) + "\n"
