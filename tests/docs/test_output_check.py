"""Checks the docs' output checking itself (ctest docs.output_check_selftest): a wrong
expected output fails with a unified diff naming the docs file and block, the `...` line
the `varies` mask and `last-digit` match only what they should, and misplaced tessera-output markers
fail extraction with the file and line."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
CHECK = HERE / "check_output.py"
EXTRACT = HERE / "extract_blocks.py"


class CheckOutput(unittest.TestCase):
    def run_check(self, expected, stdout, varies=None, exit_code=0, last_digit=False):
        with tempfile.TemporaryDirectory() as d:
            exp = pathlib.Path(d) / "doc_x_1.out"
            exp.write_text(expected, encoding="utf-8")
            args = [sys.executable, str(CHECK), "--doc", "docs/x.md:12", "--block", "doc_x_1", "--expected", str(exp)]
            if varies is not None:
                v = pathlib.Path(d) / "doc_x_1.varies"
                v.write_text(varies + "\n", encoding="utf-8")
                args += ["--varies", str(v)]
            if last_digit:
                args.append("--last-digit")
            prog = f"import sys; sys.stdout.write({stdout!r}); sys.exit({exit_code})"
            r = subprocess.run(args + ["--", sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
            return r.returncode, r.stdout

    def test_equal_passes(self):
        rc, out = self.run_check("loss 8.1191\nbytes 1835008\n", "loss 8.1191\nbytes 1835008\n")
        self.assertEqual(rc, 0, out)

    def test_trailing_whitespace_ignored(self):
        rc, out = self.run_check("a\nb\n", "a  \nb\n\n")
        self.assertEqual(rc, 0, out)

    def test_drift_fails_with_diff(self):
        rc, out = self.run_check("loss 8.1191\nbytes 1835008\n", "loss 8.1192\nbytes 1835008\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("--- docs/x.md:12 (doc_x_1, expected)", out)
        self.assertIn("+++ doc_x_1 (actual stdout)", out)
        self.assertIn("-loss 8.1191", out)
        self.assertIn("+loss 8.1192", out)

    def test_missing_and_extra_lines_fail(self):
        self.assertEqual(self.run_check("a\nb\n", "a\n")[0], 1)
        self.assertEqual(self.run_check("a\n", "a\nb\n")[0], 1)

    def test_program_failure_fails(self):
        rc, out = self.run_check("a\n", "a\n", exit_code=3)
        self.assertEqual(rc, 1, out)
        self.assertIn("exited with 3", out)

    def test_ellipsis_line(self):
        self.assertEqual(self.run_check("a\n...\nz\n", "a\nb\nc\nz\n")[0], 0)
        self.assertEqual(self.run_check("a\n...\nz\n", "a\nz\n")[0], 0)
        self.assertEqual(self.run_check("a\n...\nz\n", "a\nb\ny\n")[0], 1)
        self.assertEqual(self.run_check("a...\n", "abc\n")[0], 1)  # only a whole line is a wildcard

    def test_varies_masks_only_its_matches(self):
        varies = r"(?<=tps: ) *\d+"
        self.assertEqual(self.run_check("loss: 8.1191  tps: 749\n", "loss: 8.1191  tps: 1203\n", varies)[0], 0)
        rc, out = self.run_check("loss: 8.1191  tps: 749\n", "loss: 8.1190  tps: 749\n", varies)
        self.assertEqual(rc, 1, out)
        self.assertIn("+loss: 8.1190  tps: <varies>", out)

    def test_last_digit(self):
        line = "step:   1  loss:   8.1191  grad_norm:   1.0428  lr: 2.67e-04  memory:   0.16GiB\n"
        near = "step:   1  loss:   8.1190  grad_norm:   1.0429  lr: 2.67e-04  memory:   0.16GiB\n"
        self.assertEqual(self.run_check(line, line, last_digit=True)[0], 0)
        self.assertEqual(self.run_check(line, near, last_digit=True)[0], 0)
        self.assertEqual(self.run_check(line, near)[0], 1)  # exact unless the marker says last-digit
        for far in ("step:   1  loss:   8.1189  grad_norm:   1.0428  lr: 2.67e-04  memory:   0.16GiB\n",  # two units
                    "step:   2  loss:   8.1191  grad_norm:   1.0428  lr: 2.67e-04  memory:   0.16GiB\n",  # an integer
                    "step:   1  loss:   8.11910  grad_norm:   1.0428  lr: 2.67e-04  memory:   0.16GiB\n",  # digits
                    "step:   1  loss:   8.1191  grad_norm:   1.0428  lr: 2.67e-05  memory:   0.16GiB\n",  # exponent
                    "step:   1  loss:   8.1191  grad_norm:   1.0428  lr: 2.67e-04  memory:   0.16MiB\n"):  # text
            self.assertEqual(self.run_check(line, far, last_digit=True)[0], 1, far)


class Markers(unittest.TestCase):
    def extract(self, text):
        with tempfile.TemporaryDirectory() as d:
            md = pathlib.Path(d) / "page.md"
            md.write_text(text, encoding="utf-8")
            r = subprocess.run([sys.executable, str(EXTRACT), str(pathlib.Path(d) / "blocks"), str(md)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            outs = sorted(p.name for p in (pathlib.Path(d) / "blocks").glob("*.out"))
            return r.returncode, r.stdout, r.stderr, outs, md

    CPP = "```cpp\nint main() {}\n```\n"

    def test_marked_block_is_written(self):
        rc, out, err, outs, md = self.extract(self.CPP + "\ntext\n\n<!-- tessera-output -->\n```text\nhi\n```\n")
        self.assertEqual(rc, 0, err)
        self.assertEqual(outs, ["doc_page_1.out"])
        self.assertTrue(out.strip().endswith(f"doc_page_1.out {md.parent.name}/page.md:8"), out)

    def test_last_digit_marker(self):
        text = self.CPP + "<!-- tessera-output last-digit varies: x -->\n```\nhi\n```\n"
        with tempfile.TemporaryDirectory() as d:
            md = pathlib.Path(d) / "page.md"
            md.write_text(text, encoding="utf-8")
            r = subprocess.run([sys.executable, str(EXTRACT), str(pathlib.Path(d) / "blocks"), str(md)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            blocks = pathlib.Path(d) / "blocks"
            self.assertTrue((blocks / "doc_page_1.last-digit").exists())
            self.assertEqual((blocks / "doc_page_1.varies").read_text(encoding="utf-8"), "x\n")

    def test_unmarked_block_is_not_checked(self):
        rc, out, err, outs, _ = self.extract(self.CPP + "\n```\nhi\n```\n")
        self.assertEqual((rc, outs), (0, []), err)
        self.assertTrue(out.strip().endswith(" - - -"), out)

    def test_indented_marker_is_text(self):  # as an indented fence is: e.g. an example in a code block
        rc, out, err, outs, _ = self.extract(self.CPP + "\n    <!-- tessera-output -->\n    ```\n    hi\n    ```\n")
        self.assertEqual((rc, outs), (0, []), err)

    def assert_error(self, text, line, words):
        rc, _, err, _, md = self.extract(text)
        self.assertEqual(rc, 1, err)
        self.assertIn(f"{md}:{line}: ", err)
        self.assertIn(words, err)

    def test_no_cpp_block_above(self):
        self.assert_error("# t\n\n<!-- tessera-output -->\n```\nhi\n```\n", 3, "no ```cpp block above")

    def test_second_output_for_one_block(self):
        text = self.CPP + "<!-- tessera-output -->\n```\nhi\n```\n<!-- tessera-output -->\n```\nho\n```\n"
        self.assert_error(text, 8, "a second tessera-output block")

    def test_marker_before_cpp(self):
        self.assert_error(self.CPP + "<!-- tessera-output -->\n" + self.CPP, 4, "before a ```cpp block")

    def test_marker_not_followed_by_block(self):
        self.assert_error(self.CPP + "<!-- tessera-output -->\nprose\n```\nhi\n```\n", 4, "not followed by")
        self.assert_error(self.CPP + "<!-- tessera-output -->\n", 4, "not followed by")

    def test_malformed_marker(self):
        self.assert_error(self.CPP + "<!-- tessera-output vary: x -->\n```\nhi\n```\n", 4, "malformed marker")
        self.assert_error(self.CPP + "<!-- tessera-output varies: ( -->\n```\nhi\n```\n", 4, "bad 'varies'")


if __name__ == "__main__":
    unittest.main(verbosity=2)
