"""A stateful imitation of the GitHub REST API on loopback, checked against GitHub's OpenAPI description.

Real PyGithub talks to it through `base_url=http://127.0.0.1:PORT/api/v3`. Every request and every JSON
response is validated against `@octokit/openapi`; violations are collected in `server.violations` (the
fixture fails the test on any). Rules a schema cannot express are reproduced here: 422 for bodies over
65,536 characters and for review comments off the diff, `Link` pagination, permission levels, and
injected faults (403/429 with Retry-After, 5xx, before or after the write took effect).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from tests.servers.openapi import OpenAPI, Operation, load

PREFIX = "/api/v3"
LIMIT = 65_536
ROLES = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}


@dataclass
class Fault:
    method: str  # "POST"
    path: str  # regex searched in the path (after the prefix)
    status: int  # 500, 403, 429 ...
    times: int = 1  # how many matching requests fail
    retry_after: int | None = None  # seconds, sent as Retry-After
    after_apply: bool = False  # the write happens, then the error is returned (a lost response)


@dataclass
class Pull:
    number: int
    head_sha: str
    base_sha: str
    files: dict[str, str]  # filename -> unified diff patch
    author: str = "contributor"
    head_repo: str = ""  # "" = the same repository
    labels: list[str] = field(default_factory=list)


class GitHubImitation:
    def __init__(self, repository: str = "octo-org/kernels", token: str = "ghs_test_token") -> None:
        self.api: OpenAPI = load()
        self.repository, self.token = repository, token
        self.users: dict[str, int] = {}
        self.roles: dict[str, str] = {}  # login -> admin/maintain/write/triage/read (absent: none)
        self.pulls: dict[int, Pull] = {}
        self.comments: dict[int, dict[str, Any]] = {}  # id -> {issue, body, user}
        self.reactions: list[tuple[int, str, str]] = []  # (comment id, content, user)
        self.reviews: list[dict[str, Any]] = []
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.issues: dict[int, dict[str, Any]] = {}  # number -> {title, body, user, state} (not the pulls)
        # "owner/name" -> pushes to its branches, oldest first: {before, after, ref, timestamp, actor}
        self.activity: dict[str, list[dict[str, Any]]] = {}
        self.faults: list[Fault] = []
        self.log: list[tuple[str, str, int]] = []  # (method, path, status) of every request
        self.bodies: list[Any] = []  # JSON bodies received, in order (to look for leaked tokens)
        self.violations: list[str] = []
        self.bot = "github-actions[bot]"
        self.faulted = (
            False  # the last response was an injected fault (not validated: GitHub's 5xx are undocumented)
        )
        self.user_endpoint_forbidden = True  # GITHUB_TOKEN cannot read /user
        self._ids = itertools.count(1001)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.base_url = ""

    # -- test-side helpers -----------------------------------------------------------------------

    def start(self) -> GitHubImitation:
        handler = type("Handler", (_Handler,), {"imitation": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}{PREFIX}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def fail(self, method: str, path: str, status: int, **kw: Any) -> None:
        self.faults.append(Fault(method, path, status, **kw))

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def add_comment(self, number: int, body: str, user: str) -> int:
        cid = next(self._ids)
        self.comments[cid] = {"issue": number, "body": body, "user": user}
        return cid

    def add_issue(self, title: str, body: str, user: str) -> int:
        number = max([*self.pulls, *self.issues, 0]) + 1  # issues and pull requests share numbers
        self.issues[number] = {
            "title": title,
            "body": body,
            "user": user,
            "state": "open",
            "id": next(self._ids),
        }
        return number

    def push(self, number: int, sha: str, at: str, actor: str = "contributor") -> None:
        """A push to PR `number`'s head branch at server time `at` ("2024-05-01T12:00:00Z"): the new head."""
        pr = self.pulls[number]
        repo = pr.head_repo or self.repository
        self.activity.setdefault(repo, []).append(
            {
                "before": pr.head_sha,
                "after": sha,
                "ref": "refs/heads/feature",
                "timestamp": at,
                "actor": actor,
            }
        )
        pr.head_sha = sha

    def requests(self, method: str, pattern: str) -> list[tuple[str, str, int]]:
        return [r for r in self.log if r[0] == method and re.search(pattern, r[1])]

    # -- objects in GitHub's shape -------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _user(self, login: str) -> dict[str, Any]:
        uid = self.users.setdefault(login, len(self.users) + 1)
        return {
            **self._example("get", "/users/x", 200, f"/users/{login}", schema_of="simple-user"),
            "login": login,
            "id": uid,
            "type": "Bot" if login.endswith("[bot]") else "User",
        }

    def _example(self, method: str, path: str, status: int, url_path: str, schema_of: str = "") -> Any:
        if schema_of:
            schema = self.api.doc["components"]["schemas"][schema_of]
        else:
            op = self.api.operation(method, path)
            assert op is not None, path
            schema = self.api.response_schema(op, status)
        return self.api.example(schema, self._url(url_path))

    def _repo_obj(self, full_name: str) -> dict[str, Any]:
        owner, name = full_name.split("/")
        return {
            **self._example("get", "/repos/o/r", 200, f"/repos/{full_name}", schema_of="repository"),
            "name": name,
            "full_name": full_name,
            "owner": self._user(owner),
            "fork": full_name != self.repository,
        }

    def _comment_obj(self, cid: int) -> dict[str, Any]:
        c = self.comments[cid]
        path = f"/repos/{self.repository}/issues/comments/{cid}"
        return {
            **self._example("get", path, 200, path),
            "id": cid,
            "url": self._url(path),
            "body": c["body"],
            "user": self._user(c["user"]),
            "html_url": f"{self.base_url}/{self.repository}/pull/{c['issue']}#issuecomment-{cid}",
            "issue_url": self._url(f"/repos/{self.repository}/issues/{c['issue']}"),
        }

    def _issue_obj(self, number: int) -> dict[str, Any]:
        issue = self.issues[number]
        path = f"/repos/{self.repository}/issues/{number}"
        return {
            **self._example("get", path, 200, path),
            "id": issue["id"],
            "number": number,
            "url": self._url(path),
            "title": issue["title"],
            "body": issue["body"],
            "state": issue["state"],
            "user": self._user(issue["user"]),
            "html_url": f"{self.base_url}/{self.repository}/issues/{number}",
        }

    def _pull_obj(self, pr: Pull) -> dict[str, Any]:
        path = f"/repos/{self.repository}/pulls/{pr.number}"
        out = self._example("get", path, 200, path)
        head_repo = pr.head_repo or self.repository
        out.update(
            url=self._url(path),
            issue_url=self._url(f"/repos/{self.repository}/issues/{pr.number}"),
            number=pr.number,
            state="open",
            user=self._user(pr.author),
            labels=[
                {**self._example("", "", 0, "/labels/x", schema_of="label"), "name": n} for n in pr.labels
            ],
            head={
                **out["head"],
                "sha": pr.head_sha,
                "ref": "feature",
                "label": f"{head_repo.split('/')[0]}:feature",
                "repo": self._repo_obj(head_repo),
                "user": self._user(head_repo.split("/")[0]),
            },
            base={
                **out["base"],
                "sha": pr.base_sha,
                "ref": "main",
                "repo": self._repo_obj(self.repository),
                "user": self._user(self.repository.split("/")[0]),
            },
        )
        return out

    def _review_obj(self, review: dict[str, Any], number: int) -> dict[str, Any]:
        path = f"/repos/{self.repository}/pulls/{number}/reviews/{review['id']}"
        return {
            **self._example("get", path, 200, path),
            "id": review["id"],
            "body": review["body"],
            "commit_id": review["commit_id"],
            "user": self._user(review["user"]),
            "state": "COMMENTED",
            "html_url": f"{self.base_url}/{self.repository}/pull/{number}#pullrequestreview-{review['id']}",
        }

    def _check_obj(self, run: dict[str, Any]) -> dict[str, Any]:
        path = f"/repos/{self.repository}/check-runs/{run['id']}"
        out = self._example("get", path, 200, path)
        out.update(
            id=run["id"],
            url=self._url(path),
            name=run["name"],
            head_sha=run["head_sha"],
            status="completed",
            conclusion=run["conclusion"],
            external_id=run.get("external_id", ""),
            html_url=f"{self.base_url}/{self.repository}/runs/{run['id']}",
        )
        return out

    # -- request handling ----------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: dict[str, str], body: Any, auth: str
    ) -> tuple[int, Any, dict[str, str]]:
        op = self.api.operation(method.lower(), path)
        if op is None:
            self.violations.append(f"{method} {path}: no such operation in GitHub's API")
            return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, {}
        problems = self.api.check_request(op, query, body)
        if problems:
            self.violations += [f"request {method} {path}: {p}" for p in problems]
            return 422, _validation("Invalid request.", problems), {}
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return (
                401,
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                {},
            )
        fault = next(
            (f for f in self.faults if f.method == method and f.times > 0 and re.search(f.path, path)), None
        )
        self.faulted = fault is not None
        if fault is not None:
            fault.times -= 1
            if fault.after_apply:
                self._route(op, method, path, query, body)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            message = "API rate limit exceeded" if fault.status in (403, 429) else "Server Error"
            return (
                fault.status,
                {"message": message, "documentation_url": "https://docs.github.com/rest"},
                headers,
            )
        return self._route(op, method, path, query, body)

    def _route(
        self, op: Operation, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        t = op.template.removeprefix("/repos/{owner}/{repo}")
        args = [int(a) if a.isdigit() else a for a in re.findall(r"[^/]+", path)]
        tail = args[3:]  # after repos/owner/name
        if (method, t) == ("GET", "/activity"):  # any repository: a fork's own activity is public
            return self._activity("/".join(str(a) for a in args[1:3]), path, query)
        if op.template.startswith("/repos/") and "/".join(str(a) for a in args[1:3]) != self.repository:
            return 404, _not_found(), {}
        if (method, t) == ("GET", "/pulls/{pull_number}"):
            pr = self.pulls.get(tail[1])
            return (200, self._pull_obj(pr), {}) if pr else (404, _not_found(), {})
        if (method, t) == ("GET", "/pulls/{pull_number}/files"):
            pr = self.pulls[tail[1]]
            files = [
                {
                    **self._example("get", path, 200, f"/files/{name}", schema_of="diff-entry"),
                    "filename": name,
                    "status": "modified",
                    "patch": patch,
                }
                for name, patch in pr.files.items()
            ]
            return self._page(files, path, query)
        if (method, t) == ("GET", "/issues"):  # newest first, as GitHub sorts by default
            return self._page([self._issue_obj(n) for n in sorted(self.issues, reverse=True)], path, query)
        if (method, t) in (("POST", "/issues"), ("PATCH", "/issues/{issue_number}")):
            if len(body.get("body") or "") > LIMIT:
                return (
                    422,
                    _validation("Validation Failed", ["body is too long (maximum is 65536 characters)"]),
                    {},
                )
            if method == "POST":
                number = self.add_issue(body["title"], body.get("body") or "", self.bot)
                return 201, self._issue_obj(number), {"Location": self._url(f"{path}/{number}")}
            if tail[1] not in self.issues:
                return 404, _not_found(), {}
            self.issues[tail[1]].update({k: body[k] for k in ("title", "body", "state") if k in body})
            return 200, self._issue_obj(tail[1]), {}
        if (method, t) == ("GET", "/issues/{issue_number}") and tail[1] in self.issues:
            return 200, self._issue_obj(tail[1]), {}
        if (method, t) == ("GET", "/issues/{issue_number}"):
            number = tail[1]
            issue_path = f"/repos/{self.repository}/issues/{number}"
            out = self._example("get", issue_path, 200, issue_path)
            out.update(
                url=self._url(issue_path),
                number=number,
                user=self._user(self.pulls[number].author),
                state="open",
            )
            return 200, out, {}
        if (method, t) == ("GET", "/issues/{issue_number}/comments"):
            ids = [cid for cid, c in sorted(self.comments.items()) if c["issue"] == tail[1]]
            return self._page([self._comment_obj(cid) for cid in ids], path, query)
        if (method, t) == ("POST", "/issues/{issue_number}/comments"):
            if len(body["body"]) > LIMIT:
                return (
                    422,
                    _validation("Validation Failed", ["body is too long (maximum is 65536 characters)"]),
                    {},
                )
            cid = self.add_comment(tail[1], body["body"], self.bot)
            return 201, self._comment_obj(cid), {"Location": self._url(f"{path}/{cid}")}
        if (method, t) == ("PATCH", "/issues/comments/{comment_id}"):
            if len(body["body"]) > LIMIT:
                return (
                    422,
                    _validation("Validation Failed", ["body is too long (maximum is 65536 characters)"]),
                    {},
                )
            self.comments[tail[2]]["body"] = body["body"]
            return 200, self._comment_obj(tail[2]), {}
        if (method, t) == ("DELETE", "/issues/{issue_number}/labels/{name}"):
            pr = self.pulls.get(tail[1])
            name = unquote(str(tail[3]))
            if pr is None or name not in pr.labels:
                return (
                    404,
                    {"message": "Label does not exist", "documentation_url": "https://docs.github.com/rest"},
                    {},
                )
            pr.labels.remove(name)
            labels = [
                {**self._example("", "", 0, "/labels/x", schema_of="label"), "name": n} for n in pr.labels
            ]
            return 200, labels, {}
        if (method, t) == ("POST", "/issues/comments/{comment_id}/reactions"):
            self.reactions.append((tail[2], body["content"], self.bot))
            out = self._example("post", path, 201, path)
            return 201, {**out, "content": body["content"], "user": self._user(self.bot)}, {}
        if (method, t) == ("GET", "/collaborators/{username}/permission"):
            role = self.roles.get(str(tail[1]), "none")
            out = self._example("get", path, 200, path)
            user = self._example("", "", 0, f"/users/{tail[1]}", schema_of="collaborator")
            user.update(login=str(tail[1]), id=self._user(str(tail[1]))["id"], role_name=role)
            return 200, {**out, "permission": ROLES.get(role, "none"), "role_name": role, "user": user}, {}
        if (method, t) == ("POST", "/pulls/{pull_number}/reviews"):
            return self._create_review(tail[1], body)
        if (method, t) == ("GET", "/pulls/{pull_number}/reviews"):
            found = [self._review_obj(r, tail[1]) for r in self.reviews if r["number"] == tail[1]]
            return self._page(found, path, query)
        if (method, t) == ("POST", "/check-runs"):
            problem = _check_output_problem(body.get("output") or {})
            if problem:
                return 422, _validation("Invalid request.", [problem]), {}
            run = {
                **body,
                "id": next(self._ids),
                "annotations": list((body.get("output") or {}).get("annotations", [])),
            }
            self.check_runs[run["id"]] = run
            return 201, self._check_obj(run), {}
        if (method, t) == ("PATCH", "/check-runs/{check_run_id}"):
            run = self.check_runs[tail[1]]
            problem = _check_output_problem(body.get("output") or {})
            if problem:
                return 422, _validation("Invalid request.", [problem]), {}
            run["annotations"] += (body.get("output") or {}).get("annotations", [])
            return 200, self._check_obj(run), {}
        if (method, t) == ("GET", "/commits/{ref}/check-runs"):
            runs = [
                self._check_obj(r)
                for r in self.check_runs.values()
                if r["head_sha"] == tail[1] and r["name"] == query.get("check_name", r["name"])
            ]
            return 200, {"total_count": len(runs), "check_runs": runs}, {}
        if (method, op.template) == ("GET", "/user"):
            if self.user_endpoint_forbidden:
                return (
                    403,
                    {
                        "message": "Resource not accessible by integration",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    {},
                )
            return 200, self._example("get", "/user", 200, "/user") | {"login": self.bot}, {}
        self.violations.append(f"{method} {op.template}: not implemented by the imitation")
        return 404, _not_found(), {}

    def _activity(self, repo: str, path: str, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        known = {self.repository, *(p.head_repo for p in self.pulls.values() if p.head_repo), *self.activity}
        if repo not in known:
            return 404, _not_found(), {}
        ref = query.get("ref")
        entries = [
            {
                **self._example("", "", 0, f"/repos/{repo}/activity", schema_of="activity"),
                **{k: v for k, v in e.items() if k != "actor"},
                "id": i + 1,
                "activity_type": "push",
                "actor": self._user(e["actor"]),
            }
            for i, e in enumerate(self.activity.get(repo, []))
            if ref in (None, e["ref"], e["ref"].removeprefix("refs/heads/"))
        ]
        return self._page(entries[::-1], path, query)  # newest first (direction=desc)

    def _create_review(self, number: int, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        from kernelbot.github.types import hunk_lines  # the same hunk rule GitHub applies

        pr = self.pulls[number]
        if len(body.get("body") or "") > LIMIT:
            return 422, _validation("Validation Failed", ["body is too long"]), {}
        for c in body.get("comments", []):
            ranges = hunk_lines(pr.files.get(c["path"]))
            start = c.get("start_line", c["line"])
            if not any(lo <= start and c["line"] <= hi for lo, hi in ranges) or len(c["body"]) > LIMIT:
                return (
                    422,
                    _validation(
                        "Unprocessable Entity", ["Pull request review thread line must be part of the diff"]
                    ),
                    {},
                )
        review = {
            "id": next(self._ids),
            "number": number,
            "body": body.get("body", ""),
            "commit_id": body.get("commit_id", pr.head_sha),
            "comments": body.get("comments", []),
            "user": self.bot,
        }
        self.reviews.append(review)
        return 200, self._review_obj(review, number), {}

    def _page(self, items: list[Any], path: str, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        per_page = int(query.get("per_page", 30))
        page = int(query.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        links = []
        for rel, n in (("prev", page - 1), ("next", page + 1), ("first", 1), ("last", last)):
            if 1 <= n <= last and (rel not in ("prev", "next") or n != page):
                links.append(f'<{self.base_url}{path}?{urlencode({**query, "page": n})}>; rel="{rel}"')
        return (
            200,
            items[(page - 1) * per_page : page * per_page],
            ({"Link": ", ".join(links)} if links else {}),
        )


def _not_found() -> dict[str, Any]:
    return {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


def _validation(message: str, problems: list[str]) -> dict[str, Any]:
    return {
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "errors": [{"resource": "Request", "code": "custom", "message": p[:500]} for p in problems],
    }


def _check_output_problem(output: dict[str, Any]) -> str | None:
    if len(output.get("annotations", [])) > 50:
        return "Only 50 annotations are allowed per request"
    for key in ("summary", "text"):
        if len(output.get(key) or "") > LIMIT - 1:
            return f"output.{key} is too long (maximum is 65535 characters)"
    return None


class _Handler(BaseHTTPRequestHandler):
    imitation: GitHubImitation
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet: the imitation keeps its own log
        pass

    def _serve(self) -> None:
        imitation = self.imitation
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw.strip() else None
        query = dict(parse_qsl(parts.query))
        path = parts.path.removeprefix(PREFIX)
        headers: dict[str, str]
        if not parts.path.startswith(PREFIX):
            status, out, headers = 404, _not_found(), {}
            imitation.violations.append(f"{self.command} {parts.path}: outside {PREFIX}")
        else:
            with imitation._lock:
                imitation.bodies.append(body)
                status, out, headers = imitation.handle(
                    self.command, path, query, body, self.headers.get("Authorization", "")
                )
                op = imitation.api.operation(self.command.lower(), path)
                if op is not None and status != 401 and not imitation.faulted:
                    for problem in imitation.api.check_response(op, status, out):
                        imitation.violations.append(f"response {self.command} {path} {status}: {problem}")
                imitation.log.append((self.command, path, status))
        data = b"" if out is None else json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


def webhook_payload(
    name: str,
    *,
    repository: str,
    number: int,
    action: str | None = None,  # default: the example's own ("opened" / "created")
    head_sha: str = "",
    base_sha: str = "",
    head_repo: str = "",
    labels: tuple[str, ...] = (),
    label: str | None = None,
    body: str = "",
    commenter: str = "",
    comment_id: int = 0,
    created_at: str | None = None,  # the comment's time (GitHub's clock)
    sender: str | None = None,  # who acted (the labeller, for `labeled`)
) -> dict[str, Any]:
    """A payload GitHub sent (from @octokit/webhooks-examples), re-pointed at the test's repository."""
    import copy

    from tests.servers.openapi import webhook_examples

    want = "opened" if name == "pull_request" else "created"
    example = next(e for e in webhook_examples()[name] if e.get("action") == want)
    p = copy.deepcopy(example)
    p["action"] = action or want
    p["repository"]["full_name"] = repository
    if name == "pull_request":
        pr = p["pull_request"]
        pr["number"] = p["number"] = number
        pr["head"]["sha"], pr["base"]["sha"] = head_sha, base_sha
        pr["base"]["repo"]["full_name"] = repository
        pr["head"]["repo"]["full_name"] = head_repo or repository
        pr["labels"] = [{"name": n} for n in labels]
        if label is not None:
            p["label"] = {"name": label}
        if sender is not None:
            p["sender"]["login"] = sender
    else:
        p["issue"]["number"] = number
        p["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{repository}/pulls/{number}"}
        p["comment"].update(body=body, id=comment_id)
        p["comment"]["user"]["login"] = commenter
        if created_at is not None:
            p["comment"]["created_at"] = p["comment"]["updated_at"] = created_at
    return p
