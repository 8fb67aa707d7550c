"""Which tests a repo_patch task names (its test patch, its command), and how a junit report
answers for each: the list a candidate's run must report passed, one by one."""

from __future__ import annotations

from verifiers.families.repo_expected import expected_tests, unmet

TEST_PATCH = """\
diff --git a/tests/test_calc.py b/tests/test_calc.py
index 1111111..2222222 100644
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -10,6 +10,10 @@ def test_divide():
     assert divide(4, 2) == 2
+    assert divide(1, 4) == 0.25
+
+async def test_awaited():
+    assert True
@@ -30,3 +34,8 @@ class TestRounding:
+class TestPower:
+    def test_square(self):
+        assert power(3, 2) == 9
diff --git a/src/calc.py b/src/calc.py
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,3 @@
+def test_looking_helper():
+    pass
diff --git a/tests/test_gone.py b/tests/test_gone.py
deleted file mode 100644
--- a/tests/test_gone.py
+++ /dev/null
@@ -1,2 +0,0 @@
-def test_old():
-    pass
"""


def test_the_test_patch_names_added_and_changed_tests_in_test_modules_only():
    names = [test.shown for test in expected_tests(TEST_PATCH, ["python", "-m", "pytest"])]

    assert names == [
        "tests/test_calc.py::test_divide",  # changed: the hunk header's function
        "tests/test_calc.py::test_awaited",
        "tests/test_calc.py::TestRounding",
        "tests/test_calc.py::TestPower",
        "tests/test_calc.py::test_square",
    ]


def test_node_ids_of_the_command_are_named_too():
    command = ["pytest", "tests/test_a.py::TestX::test_y[1-2]", "-k", "x", "tests/test_b.py"]

    names = [test.shown for test in expected_tests("", command)]

    assert names == ["tests/test_a.py::test_y"]


def test_each_named_test_must_be_reported_passed():
    expected = expected_tests(TEST_PATCH, ["pytest"])
    cases = [
        ["tests.test_calc", "test_divide[small]", "passed"],
        ["tests.test_calc", "test_divide[large]", "skipped"],
        ["tests.test_calc", "test_awaited", "passed"],
        ["tests.test_calc.TestRounding", "test_half", "passed"],
        ["tests.test_calc.TestPower", "test_square", "passed"],
        ["tests.test_other", "test_square", "failed"],  # another module's namesake
    ]

    assert unmet(expected, cases) == ["tests/test_calc.py::test_divide (skipped)"]
    assert unmet(expected, cases[2:]) == ["tests/test_calc.py::test_divide (not run)"]
