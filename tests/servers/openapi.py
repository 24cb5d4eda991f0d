"""GitHub's OpenAPI description (npm @octokit/openapi): operation lookup, validation, example objects."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import referencing
import referencing.jsonschema
from openapi_schema_validator import OAS30Validator

NPM_DIR = Path(__file__).resolve().parents[1] / ".npm" / "node_modules"
_URN = "urn:github-openapi"


def npm_root() -> Path:
    """Where the octokit npm packages are: $KERNELBOT_NPM_DIR, else tests/.npm/node_modules."""
    return Path(os.environ.get("KERNELBOT_NPM_DIR") or NPM_DIR)


def _pointer(*parts: str) -> str:
    return "#/" + "/".join(quote(p.replace("~", "~0").replace("/", "~1"), safe="") for p in parts)


@dataclass(frozen=True)
class Operation:
    template: str  # "/repos/{owner}/{repo}/..."
    method: str  # lower case
    spec: dict[str, Any]


class OpenAPI:
    """The description, loaded once; validates bodies against the schema of one operation."""

    def __init__(self, path: Path) -> None:
        self.doc = json.loads(path.read_text())
        resource = referencing.Resource.from_contents(
            self.doc, default_specification=referencing.jsonschema.DRAFT4
        )
        self.registry: referencing.Registry = referencing.Registry().with_resource(_URN, resource)
        self._routes = [
            (re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(t)) + "$"), t)
            for t in self.doc["paths"]
        ]

    def operation(self, method: str, path: str) -> Operation | None:
        # Literal segments beat parameters ("/check-runs/{id}" vs "/{ref}"): prefer fewer parameters.
        matches = [t for rx, t in self._routes if rx.match(path) and method in self.doc["paths"][t]]
        if not matches:
            return None
        template = min(matches, key=lambda t: t.count("{"))
        return Operation(template, method, self.doc["paths"][template][method])

    def deref(self, obj: Any) -> Any:
        while isinstance(obj, dict) and "$ref" in obj:
            node: Any = self.doc
            for part in obj["$ref"].removeprefix("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            obj = node
        return obj

    def _errors(self, pointer: str, instance: Any) -> list[str]:
        validator = OAS30Validator({"$ref": _URN + pointer}, registry=self.registry)
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
            for e in validator.iter_errors(instance)
        ]

    def check_request(self, op: Operation, query: dict[str, str], body: Any) -> list[str]:
        problems = []
        names = {self.deref(p)["name"] for p in op.spec.get("parameters", [])}
        problems += [f"unknown query parameter {q!r}" for q in query if q not in names]
        request = op.spec.get("requestBody")
        if request is not None and "application/json" in self.deref(request).get("content", {}):
            if body is None and self.deref(request).get("required"):
                problems.append("missing JSON body")
            elif body is not None:
                base = (
                    request["$ref"][2:].split("/")
                    if "$ref" in request
                    else ["paths", op.template, op.method, "requestBody"]
                )
                problems += self._errors(_pointer(*base, "content", "application/json", "schema"), body)
        elif body is not None:
            problems.append("a JSON body was sent to an operation that takes none")
        return problems

    def check_response(self, op: Operation, status: int, body: Any) -> list[str]:
        responses = op.spec.get("responses", {})
        response = responses.get(str(status))
        if response is None:
            return [f"status {status} is not a documented response of {op.method.upper()} {op.template}"]
        base = ["paths", op.template, op.method, "responses", str(status)]
        if "$ref" in response:
            base = response["$ref"][2:].split("/")
        content = self.deref(response).get("content", {})
        if "application/json" not in content:
            return [] if body is None else [f"status {status} of {op.template} has no JSON body"]
        return self._errors(_pointer(*base, "content", "application/json", "schema"), body)

    def response_schema(self, op: Operation, status: int) -> dict[str, Any]:
        response = self.deref(op.spec["responses"][str(status)])
        return self.deref(response["content"]["application/json"]["schema"])

    def example(self, schema: Any, url: str, depth: int = 0, hint: str = "") -> Any:
        """A minimal instance of `schema`: required properties only, URLs under `url`, nullables None."""
        schema = self.deref(schema)
        if "allOf" in schema:
            out: dict[str, Any] = {}
            for part in schema["allOf"]:
                out.update(self.example(part, url, depth, hint))
            return out
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.example(schema[key][0], url, depth, hint)
        if schema.get("nullable") and depth > 0:
            return None
        kind = schema.get("type")
        if "enum" in schema:
            return schema["enum"][0]
        if kind == "object" or "properties" in schema:
            props = schema.get("properties", {})
            return {
                name: self.example(
                    props.get(name, {}),
                    url if name == "url" else f"{url}/{name.removesuffix('_url')}",
                    depth + 1,
                    name,
                )
                for name in schema.get("required", [])
            }
        if kind == "array":
            return []
        if kind == "integer":
            return 1
        if kind == "number":
            return 1.0
        if kind == "boolean":
            return False
        if kind == "string":
            fmt = schema.get("format")
            if fmt == "date-time":
                return "2024-01-01T00:00:00Z"
            if fmt == "uri" or "url" in hint:
                return url
            return "x"
        return None


@cache
def load() -> OpenAPI:
    """Once per test session (13 MB of JSON)."""
    path = npm_root() / "@octokit" / "openapi" / "generated" / "api.github.com.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: run `npm install --prefix tests/.npm @octokit/openapi @octokit/webhooks-examples`"
        )
    return OpenAPI(path)


@cache
def webhook_examples() -> dict[str, list[dict[str, Any]]]:
    path = npm_root() / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"
    return {entry["name"]: entry["examples"] for entry in json.loads(path.read_text())}
