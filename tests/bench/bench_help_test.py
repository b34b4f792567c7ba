"""Every scripts/bench_*.sh --help exits 0 without building or running
anything and names every option the script takes: those of its
bench_option function and the shared --json and --build-dir
(scripts/bench_lib.sh). The help is the script's opening comment, so this
is what keeps that comment and the script's options together."""
import pathlib
import re
import subprocess
import unittest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"
SHARED_OPTIONS = {"--json", "--build-dir"}


def options_of(script_text):
    """The options of the script's bench_option cases (--quick, --keys...)."""
    body = re.search(r"^bench_option\(\) \{\n(.*?)^\}", script_text,
                     re.MULTILINE | re.DOTALL)
    if body is None:
        return set()
    return set(re.findall(r"(--[a-z_-]+)(?:=\*)?\)", body.group(1)))


class BenchHelpTest(unittest.TestCase):

    def test_options_of_reads_the_cases(self):
        text = ("bench_option() {\n  case \"$1\" in\n"
                "    --quick) quick=1 ;;\n    --keys=*) keys=${1#*=} ;;\n"
                "    *) return 1 ;;\n  esac\n}\n--other) x ;;\n")
        self.assertEqual(options_of(text), {"--quick", "--keys"})

    def test_every_script_names_every_option(self):
        scripts = sorted(p for p in SCRIPTS.glob("bench_*.sh")
                         if p.name != "bench_lib.sh")
        self.assertGreater(len(scripts), 5)
        for script in scripts:
            with self.subTest(script=script.name):
                run = subprocess.run(["bash", str(script), "--help"],
                                     capture_output=True, text=True,
                                     timeout=60, check=False)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("Usage", run.stdout)
                for option in options_of(script.read_text()) | SHARED_OPTIONS:
                    self.assertIn(option, run.stdout)


if __name__ == "__main__":
    unittest.main()
