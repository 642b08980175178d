"""openapi.yaml for generators and readers: every operation carries an example (its request body, a success answer,
a parameter, or a problem answer it shares), and every example is valid against its own schema."""
import pathlib
import sys

import jsonschema
import yaml

root = pathlib.Path(__file__).resolve().parent.parent
spec = yaml.safe_load((root / "openapi.yaml").read_text())
problems = []


def deref(node):
    if isinstance(node, dict) and "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return deref(target)
    return node


def validate(example, schema, where):
    # The schema's `#/components/...` references resolve inside the document it is placed in.
    document = {**schema, "components": spec["components"]}
    validator = jsonschema.Draft202012Validator(document)
    for error in sorted(validator.iter_errors(example), key=lambda e: list(e.path))[:3]:
        problems.append(f"{where}: example invalid at {list(error.path)}: {error.message[:200]}")


def media_examples(content, where):
    found = 0
    for media, body in (content or {}).items():
        if "example" in body:
            found += 1
            validate(body["example"], body.get("schema", {}), f"{where} {media}")
        found += len(body.get("examples", {}))
    return found


for path, item in spec["paths"].items():
    for method, op in item.items():
        if method == "parameters":
            continue
        where = f"{method.upper()} {path} ({op['operationId']})"
        count = 0
        if "requestBody" in op:
            count += media_examples(deref(op["requestBody"]).get("content"), where + " request")
        for status, answer in op["responses"].items():
            count += media_examples(deref(answer).get("content"), f"{where} {status}")
        for parameter in op.get("parameters", []) + item.get("parameters", []):
            count += len(deref(parameter).get("schema", {}).get("examples", [])) + ("example" in deref(parameter))
        if count == 0:
            problems.append(f"{where}: no example")

for problem in problems:
    print(problem)
print(f"openapi examples: {len(problems)} problems")
sys.exit(1 if problems else 0)
