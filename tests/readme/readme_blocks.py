"""The fenced code blocks of README.md, which the README tests run.

A block is a fence (a line "```lang") up to the next "```". An HTML comment
on the line right above the fence, "<!-- not run: REASON -->", excuses a
block from being run; test_readme.py allows that only for blocks that need
docker, kubectl or sbatch, and runs every other block (it says how for each
language).

As a program it writes the one C++ block to a file, which CMake compiles
(tests/readme/CMakeLists.txt):

    readme_blocks.py README.md --lang=cpp --output=FILE
"""

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    lang: str          # the fence's info string: "sh", "python", "cpp", ...
    text: str          # the lines between the fences
    line: int          # 1-based line of the opening fence
    not_run: str = ""  # the reason of a "<!-- not run: ... -->" above it

    def where(self):
        return f"README.md:{self.line} ({self.lang or 'no language'})"


def read_blocks(path):
    """Every fenced block of the Markdown file ``path``, in order. A fence
    left open is an error (ValueError)."""
    lines = Path(path).read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        above = _NOT_RUN.match(lines[i - 1]) if i > 0 else None
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].rstrip() == "```"), None)
        if end is None:
            raise ValueError(f"{path}:{i + 1}: a code block is never closed")
        blocks.append(Block(lang=opening.group(1),
                            text="\n".join(lines[i + 1:end]) + "\n",
                            line=i + 1,
                            not_run=above.group(1) if above else ""))
        i = end + 1
    return blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("markdown")
    parser.add_argument("--lang", required=True,
                        help="the language of the one block to write")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    try:
        found = [b for b in read_blocks(args.markdown) if b.lang == args.lang]
    except (OSError, ValueError) as e:
        sys.exit(f"readme_blocks: {e}")
    if len(found) != 1:
        sys.exit(f"readme_blocks: {args.markdown} has {len(found)} "
                 f"'{args.lang}' blocks; one is expected")
    block = found[0]
    Path(args.output).write_text(
        f"// Extracted from {block.where()} by {Path(__file__).name}: edit "
        f"the README, not this file.\n{block.text}")


if __name__ == "__main__":
    main()
