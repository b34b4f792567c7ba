"""The --help of the scripts in scripts/ is each one's opening comment,
whole.

Every scripts/bench_*.sh --help exits 0 without building or running
anything and names every option the script takes: those of its
bench_option function and the shared --json and --build-dir
(scripts/bench_lib.sh). No script prints a fixed range of its own lines
as help: such ranges fell behind the comments they cut (bench_ps.sh
printed no usage)."""
import pathlib
import re
import subprocess
import unittest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"
SHARED_OPTIONS = {"--json", "--build-dir"}


def options_of(script_text):
    """The options of the script's bench_option cases (--quick, --keys...),
    or None when it defines no bench_option."""
    body = re.search(r"^bench_option\(\) \{(.*?)\besac\b", script_text,
                     re.MULTILINE | re.DOTALL)
    if body is None:
        return None
    return set(re.findall(r"(--[a-z0-9_-]+)(?:=\*)?(?=[|)])", body.group(1)))


def names(text, option):
    """Whether `option` appears whole in `text` (not as --large in
    --large_budget_mib)."""
    return re.search(re.escape(option) + r"(?![\w-])", text) is not None


class BenchHelpTest(unittest.TestCase):

    def test_options_of_reads_the_cases(self):
        text = ("bench_option() {\n  case \"$1\" in\n"
                "    --quick) quick=1 ;;\n    --keys=*) keys=${1#*=} ;;\n"
                "    --a=*|--b-c=*) x ;;\n    *) return 1 ;;\n  esac\n}\n"
                "--other) x ;;\n")
        self.assertEqual(options_of(text), {"--quick", "--keys", "--a", "--b-c"})
        one_line = 'bench_option() { case "$1" in --rows=*) r=1 ;; *) return 1 ;; esac; }'
        self.assertEqual(options_of(one_line), {"--rows"})
        self.assertIsNone(options_of("no options here"))
        self.assertTrue(names("--large[=N] --keys=N", "--large"))
        self.assertFalse(names("--large_budget_mib=M", "--large"))

    def test_every_bench_script_names_every_option(self):
        scripts = sorted(p for p in SCRIPTS.glob("bench_*.sh")
                         if p.name != "bench_lib.sh")
        self.assertGreater(len(scripts), 5)
        for script in scripts:
            with self.subTest(script=script.name):
                text = script.read_text()
                options = options_of(text)
                if "bench_option()" in text:
                    self.assertTrue(options, "no options read")
                run = subprocess.run(["bash", str(script), "--help"],
                                     capture_output=True, text=True,
                                     timeout=60, check=False)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("Usage", run.stdout)
                for option in (options or set()) | SHARED_OPTIONS:
                    self.assertTrue(names(run.stdout, option), option)

    def test_no_script_prints_a_fixed_range_as_help(self):
        fixed = re.compile(r"""sed -n ['"]?\d+,\d+p['"]? "\$0\"""")
        for script in sorted(SCRIPTS.glob("*.sh")):
            with self.subTest(script=script.name):
                self.assertIsNone(fixed.search(script.read_text()))


if __name__ == "__main__":
    unittest.main()
