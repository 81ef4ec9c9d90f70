"""Prolific's own API description (`shared/reference/prolific/openapi.yml`) as a checker.

Every request a test sends to the emulator is checked against the request schema of the operation it
calls, and every answer against that operation's schema for the status it has, with a JSON-Schema
validator (`jsonschema`, the description's `components` resolved through a `referencing` registry). The
description lives beside the project (`../shared/reference` from the project root, a read-only
reference CI provides); where it is absent the tests that need it skip, saying so.

A status the operation does not list is a violation, except 401 (the security scheme's answer to a
missing or wrong token), and every error must still be in the `Error` envelope. The description gives
some 400s bare (`ErrorDetail`) and most wrapped (`Error`); the service has one error handler and the
reference saw the wrapped form, so the wrapped envelope passes either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

SPEC_PATH = Path("shared") / "reference" / "prolific" / "openapi.yml"
URI = "urn:prolific:openapi"
REPO = Path(__file__).resolve().parents[2]


def find_spec() -> Path | None:
    """`../shared/reference/prolific/openapi.yml` beside the project, looked for from the project root up
    (a git worktree sits one level deeper than the main checkout)."""
    for base in REPO.parents:
        if (base / SPEC_PATH).is_file():
            return base / SPEC_PATH
    return None


def need_spec() -> Path:
    path = find_spec()
    if path is None:
        pytest.skip(f"Prolific's API description is not here: no {SPEC_PATH} beside the project (../shared is "
                    "a reference CI provides; a fresh clone has none)")
    return path


@cache
def _spec(path: Path) -> dict[str, Any]:
    import yaml

    return dict(_any_of(yaml.safe_load(path.read_text(encoding="utf-8"))))


def _any_of(node: Any) -> Any:
    """`oneOf` read as `anyOf`: the description's alternatives overlap (a select filter and its detailed
    form have no required field that tells them apart), so a valid answer matches several of them and
    `oneOf` would refuse every one."""
    if isinstance(node, dict):
        return {("anyOf" if k == "oneOf" else k): _any_of(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_any_of(v) for v in node]
    return node


def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # `format` checks strings only; the type is the schema's business
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value


@dataclass
class Violation:
    method: str
    path: str
    where: str  # "request" or "response <status>"
    message: str

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.where}: {self.message}"


@dataclass
class Contract:
    """Checks requests and answers against the description; collects what breaks it."""

    spec: dict[str, Any]
    violations: list[Violation] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (METHOD, template) of every operation checked

    def __post_init__(self) -> None:
        from jsonschema import Draft202012Validator, FormatChecker
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        self._registry = Registry().with_resource(URI, Resource.from_contents(self.spec, default_specification=DRAFT202012))
        self._formats = FormatChecker(formats=())
        self._formats.checks("date-time")(_date_time)
        self._validator_cls = Draft202012Validator
        self._routes: list[tuple[re.Pattern[str], str]] = []
        for template in self.spec["paths"]:
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template.rstrip("/")))
            self._routes.append((re.compile("^" + pattern + "/?$"), template))
        self._routes.sort(key=lambda r: r[1].count("{"))  # literal segments win over parameters

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]] | None:
        for pattern, template in self._routes:
            if pattern.match(path):
                op = self.spec["paths"][template].get(method.lower())
                if op is not None:
                    return template, op
        return None

    def _errors(self, pointer: str, instance: Any) -> list[str]:
        schema = {"$ref": f"{URI}#{pointer}"}
        validator = self._validator_cls(schema, registry=self._registry, format_checker=self._formats)
        out = []
        for err in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            out.append(f"{where}: {err.message[:300]}")
        return out

    @staticmethod
    def _pointer(template: str, method: str, *rest: str) -> str:
        parts = ["paths", template, method.lower(), *rest]
        return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            node: Any = self.spec
            for part in schema["$ref"].lstrip("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            schema = node
        return schema

    def _check_query(self, method: str, path: str, op: dict[str, Any], query: dict[str, str]) -> None:
        """Required query parameters: a plain one must be there; an object one (style form, exploded, as
        `filter` of the group list: `workspace_id=` or `project_id=`) must match its schema."""
        for param in op.get("parameters", []):
            if param.get("in") != "query" or not param.get("required"):
                continue
            schema = self._resolve(param.get("schema") or {})
            options = [self._resolve(s) for s in schema.get("anyOf", [])] or [schema]
            if all(o.get("type") == "object" for o in options):
                if not any(set(o.get("required", [])) <= set(query) for o in options):
                    wanted = " or ".join("+".join(o.get("required", [])) for o in options)
                    self.violations.append(Violation(method, path, "request", f"query needs {wanted}"))
            elif param["name"] not in query:
                self.violations.append(Violation(method, path, "request", f"query parameter {param['name']} is required"))

    def check(self, method: str, path: str, body: Any, status: int, answer: Any,
              query: dict[str, str] | None = None) -> None:
        """One exchange: the request's query and body, then the answer for its status."""
        found = self.operation(method, path)
        if found is None:
            self.violations.append(Violation(method, path, "request", "no such operation in the description"))
            return
        template, op = found
        self.seen.add((method.upper(), template))
        self._check_query(method, path, op, query or {})
        req = op.get("requestBody", {}).get("content", {}).get("application/json")
        if req is not None and "schema" in req and method.upper() in ("POST", "PATCH", "PUT"):
            for msg in self._errors(self._pointer(template, method, "requestBody", "content", "application/json", "schema"), body):
                self.violations.append(Violation(method, path, "request", msg))
        responses = op.get("responses", {})
        key = str(status)
        if key not in responses:
            if status != 401:
                self.violations.append(Violation(method, path, f"response {status}",
                                                 f"status not in the description (it lists {', '.join(responses)})"))
            if status >= 400:
                for msg in self._errors("/components/schemas/Error", answer):
                    self.violations.append(Violation(method, path, f"response {status}", msg))
            return
        content = (responses[key].get("content") or {}).get("application/json")
        if status == 204 or content is None or "schema" not in content:  # HTTP: a 204 has no body
            if answer not in (None, b"", ""):
                self.violations.append(Violation(method, path, f"response {status}", "the description has no body here"))
            return
        pointer = self._pointer(template, method, "responses", key, "content", "application/json", "schema")
        problems = self._errors(pointer, answer)
        if problems and status >= 400 and not self._errors("/components/schemas/Error", answer):
            problems = []  # the description has some errors bare (`ErrorDetail`), most wrapped: one envelope for all
        for msg in problems:
            self.violations.append(Violation(method, path, f"response {status}", msg))

    def report(self) -> str:
        return "\n".join(str(v) for v in self.violations)


def contract() -> Contract:
    return Contract(_spec(need_spec()))


def observer(c: Contract, requests: bool = True) -> Callable[[Any, Any], None]:
    """An `EmulatorApp` observer that checks every research-API exchange (the participant side channel,
    `/emulator/`, is the emulator's own and not in the description); `requests=False` checks only the
    answers (for tests that send malformed requests on purpose)."""

    def observe(request: Any, response: Any) -> None:
        if not request.path.startswith("/api/"):
            return
        try:
            body = json.loads(request.body) if request.body and request.body.strip() else None
        except (ValueError, RecursionError):
            body = request.body
        try:
            answer = json.loads(response.body) if response.body else None
        except (ValueError, RecursionError):
            answer = response.body
        if not requests:
            before = len(c.violations)
            c.check(request.method, request.path, body, response.status, answer, request.query_dict())
            c.violations[before:] = [v for v in c.violations[before:] if v.where != "request"]
            return
        c.check(request.method, request.path, body, response.status, answer, request.query_dict())
    return observe
