"""`verifier --help`: every command with its options, from the option declarations."""

from __future__ import annotations

from verifier import __version__
from verifier.options import COMMANDS, OPTIONS

INTRO = "Grade agent case directories against eval.yaml and write Harbor rewards."


def overview() -> str:
    lines = [f"usage: verifier COMMAND [OPTIONS]   (harbor-verifier {__version__})", "", INTRO]
    for command in COMMANDS.values():
        arguments = " ".join(OPTIONS[name].metavar or name.upper() for name in command.positional)
        lines += ["", f"verifier {command.name} {arguments}".rstrip(), f"  {command.help}"]
        for name in command.options:
            if name in command.positional:
                continue
            option = OPTIONS[name]
            flags = ", ".join(option.flags)
            if not option.is_flag:
                flags += f" {option.metavar or name.upper()}"
            where = command.source_of(option)
            lines.append(f"    {flags:28} {command.help_of(option)}")
            if where:
                lines.append(f"    {'':28} ({where})")
    lines += [
        "",
        "verifier --version, -V, version",
        "  Print the version.",
        "",
        "Run `verifier COMMAND --help` for one command's help.",
    ]
    return "\n".join(lines)
