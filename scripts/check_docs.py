"""Checks the project's Markdown: every relative link names a file that exists, and every #anchor a heading of that
file (GitHub's rule: lower case, punctuation dropped, spaces to hyphens); README.md stays a guide of at most 450
lines. Run by make test; exit 1 with each broken link."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
files = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "bench" / "README.md", root / "bench" / "history.md",
         *sorted((root / "deploy").rglob("*.md")), *sorted((root / "clients").rglob("*.md"))]
# A package's build folder holds its dependencies' checkouts, not the project's documents.
files = [f for f in files if ".build" not in f.relative_to(root).parts]
link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    found, in_code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = re.sub(r"[`*]", "", line.lstrip("#").strip()).lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        candidate, n = slug, 1
        while candidate in found:
            candidate, n = f"{slug}-{n}", n + 1
        found.add(candidate)
    return found


problems = []
for path in files:
    if not path.exists():
        continue
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in link.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            problems.append(f"{path.relative_to(root)}: {target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{path.relative_to(root)}: {target}: no such heading")
# Every alert's runbook_url names a section of docs/runbooks.md.
runbooks = root / "docs" / "runbooks.md"
for anchor in re.findall(r'runbook_url: "[^"#]*#([^"]+)"', (root / "deploy" / "prometheus" / "alerts.yml").read_text()):
    if anchor not in anchors(runbooks):
        problems.append(f"deploy/prometheus/alerts.yml: runbook_url #{anchor}: no such heading in docs/runbooks.md")
readme_lines = len((root / "README.md").read_text().splitlines())
if readme_lines > 450:
    problems.append(f"README.md: {readme_lines} lines, more than 450")
for problem in problems:
    print(problem)
print(f"docs: {len(files)} files checked, {len(problems)} problems")
sys.exit(1 if problems else 0)
