"""The documents' examples held to what they show: the JavaScript of docs/api.md type-checked (tsc, strict) against
the web client's declarations; the Swift of clients/swift/README.md the same, line for line, as the function in
clients/swift/Tests that the client's tests build; the Kotlin of clients/android/README.md compiled (kotlinc) against
the Java client; every `desk-gateway …` command in the documents a subcommand with options the built CLI has (its
--experimental-dump-help). Run by make test after the build; exit 1 with each problem.
Usage: check_doc_examples.py [CLI] (default .build/debug/desk-gateway)."""
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
cli = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".build" / "debug" / "desk-gateway"
problems = []


def fenced(path, language):
    return re.findall(r"```" + language + r"\n(.*?)```", path.read_text(), re.S)


def javascript():
    """docs/api.md's example as a strict TypeScript module beside the client's declarations; its free names declared."""
    (example,) = fenced(root / "docs" / "api.md", "js")
    lines = example.splitlines()
    free = ("declare const sendbirdUserId: string;\ndeclare const sendbirdAccessToken: string;\n"
            "declare const csatMessageId: number;\n")
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        shutil.copy(root / "clients" / "web" / "desk-gateway.d.ts", folder)
        (folder / "example.ts").write_text(lines[0] + "\n" + free + "\n".join(lines[1:]) + "\nexport {};\n")
        (folder / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
            "strict": True, "noEmit": True, "target": "es2022", "module": "es2022", "moduleResolution": "node",
            "lib": ["es2022", "dom", "dom.iterable"]}, "files": ["example.ts"]}))
        done = subprocess.run(["tsc", "-p", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            problems.append("docs/api.md: the JavaScript example does not type-check against clients/web/desk-gateway.d.ts:\n"
                            + done.stdout + done.stderr)


def swift():
    """The README's example is the body of readmeExample(…), which `swift build --build-tests` compiles."""
    (example,) = fenced(root / "clients" / "swift" / "README.md", "swift")
    shown = [line for line in example.splitlines() if not line.startswith("import ")]
    source = (root / "clients" / "swift" / "Tests" / "DeskGatewayClientTests" / "ReadmeExample.swift").read_text()
    body = re.search(r"func readmeExample\(.*?\) async throws \{\n(.*)\n\}\n", source, re.S).group(1).splitlines()
    if [line for line in shown if line.strip()] != [line[4:] for line in body if line.strip()]:
        problems.append("clients/swift/README.md: the example differs from readmeExample in "
                        "clients/swift/Tests/DeskGatewayClientTests/ReadmeExample.swift")


def kotlin():
    """clients/android/README.md's example compiled by Debian's kotlinc against the client built here (javac, Java 8).
    kotlinx.coroutines is not among Debian's jars: withContext and Dispatchers are stood in for, as plain calls."""
    (example,) = fenced(root / "clients" / "android" / "README.md", "kotlin")
    body = "\n".join(("    " + line) if line else "" for line in example.splitlines())
    libraries = "/usr/share/java/okhttp.jar:/usr/share/java/okio.jar:/usr/share/java/com.android.json.jar"
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        sources = sorted(str(path) for path in (root / "clients" / "android" / "src" / "main" / "java" / "deskgateway").glob("*.java"))
        subprocess.run(["javac", "--release", "8", "-d", str(folder / "client"), "-cp", libraries, *sources], check=True)
        (folder / "Example.kt").write_text(f"""import deskgateway.*
import okhttp3.OkHttpClient

object Dispatchers {{ val IO = Unit }}
@Suppress("UNUSED_PARAMETER")
fun <T> withContext(context: Any, block: () -> T): T = block()

fun example(savedToken: String?, appOkHttpClient: OkHttpClient, url: String, userId: String, sendbirdToken: String,
            sendbirdUserId: String, sendbirdAccessToken: String, csatMessageId: Long) {{
{body}
}}
""")
        done = subprocess.run(["kotlinc", str(folder / "Example.kt"), "-cp", f"{folder / 'client'}:{libraries}", "-d", str(folder / "out")],
                              capture_output=True, text=True)
        if done.returncode != 0:
            problems.append("clients/android/README.md: the Kotlin example does not compile against the client:\n"
                            + "\n".join(line for line in (done.stdout + done.stderr).splitlines() if "error:" in line))


def option_names(command):
    return {("--" if name["kind"] == "long" else "-") + name["name"]
            for argument in command.get("arguments", []) for name in argument.get("names", [])} | {"--help", "-h", "--version"}


def commands():
    """Each `desk-gateway …` of the documents, in code spans and blocks: its subcommands exist, its options too."""
    tree = json.loads(subprocess.run([str(cli), "--experimental-dump-help"], capture_output=True, text=True, check=True).stdout)["command"]
    documents = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "deploy").rglob("*.md")),
                 root / "bench" / "README.md", root / "deploy" / "systemd" / "desk-gateway.service"]
    checked = 0
    for path in documents:
        text = path.read_text()
        pieces = [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S) for line in block.splitlines()]
        pieces += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        pieces += [line.lstrip("#").strip() for line in text.splitlines() if path.suffix == ".service"]
        for piece in pieces:
            for match in re.finditer(r"(?:^|[\s/=])desk-gateway ([a-z][\w\- .=\[\]<>…,'\"/:]*)", piece):
                checked += 1
                problem = check_command(tree, match.group(1))
                if problem:
                    problems.append(f"{path.relative_to(root)}: `desk-gateway {match.group(1)}`: {problem}")
    return checked


def check_command(tree, text):
    words = text.split(" && ")[0].split(" | ")[0]
    try:
        tokens = shlex.split(words)
    except ValueError:
        tokens = words.split()
    command, path = tree, []
    for token in (token.strip("[]") for token in tokens):
        subcommands = {sub["commandName"]: sub for sub in command.get("subcommands", [])}
        if token.startswith("-"):
            if token.split("=")[0] not in option_names(command):
                return f"{' '.join(['desk-gateway', *path])} has no option {token.split('=')[0]}"
        elif token in subcommands:
            command = subcommands[token]
            path.append(token)
        elif subcommands:
            return f"{' '.join(['desk-gateway', *path])} has no subcommand {token}"
        # Anything else is an option's value or the command's own argument.
    return None


javascript()
swift()
kotlin()
count = commands()
for problem in problems:
    print(problem)
print(f"examples: docs/api.md's JavaScript, the Swift and Kotlin of the clients' READMEs, {count} desk-gateway commands; "
      f"{len(problems)} problems")
sys.exit(1 if problems else 0)
