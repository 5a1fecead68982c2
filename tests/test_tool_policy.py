"""The sandbox policy and commands.yaml: repositories, scripts, executables, env, git config, plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from daari.config import ToolsConfig, config_from_dict
from daari.errors import ConfigError
from daari.tools.commands import CommandsFileError, load_project_commands, parse_commands, split_command
from daari.tools.patterns import CommandMatch
from daari.tools.plan import Unavailable, plan_command
from daari.tools.policy import GIT_HARDENING, Refused, git_overrides, resolve_repo, script_path, scrubbed_env
from tests.tool_sandbox import Sandbox


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


def test_repo_comes_from_the_header_under_an_allowed_root_else_from_repo_root(sandbox: Sandbox) -> None:
    config = sandbox.config()
    assert resolve_repo(None, config) == sandbox.repo.resolve()
    assert resolve_repo(str(sandbox.repo), config) == sandbox.repo.resolve()
    (sandbox.root / "other").mkdir()
    assert resolve_repo(str(sandbox.root / "other"), config) == (sandbox.root / "other").resolve()
    with pytest.raises(Refused, match="repo_root"):
        resolve_repo(None, ToolsConfig(enabled=True))


@pytest.mark.parametrize("header", ["{outside}", "{root}/../outside", "{root}-evil", "relative/path", "{root}/link-out",
                                    "{root}/missing", "/", "{root}/repo/README.md"])
def test_bad_repo_headers_are_refused(sandbox: Sandbox, header: str) -> None:
    (sandbox.root.parent / "allowed-evil").mkdir()
    (sandbox.root / "link-out").symlink_to(sandbox.outside)
    (sandbox.root.parent / "allowed").joinpath("x")  # the root itself exists
    value = header.format(outside=sandbox.outside, root=sandbox.root)
    with pytest.raises(Refused):
        resolve_repo(value, sandbox.config())


def test_scripts_must_be_listed_and_inside_the_repo(sandbox: Sandbox) -> None:
    repo = sandbox.repo.resolve()
    allowed = ("./scripts/ok.sh", "./scripts/link-out.sh", "../outside/evil.sh")
    assert script_path(repo, "./scripts/ok.sh", allowed) == repo / "scripts" / "ok.sh"
    for requested, reason in (("./scripts/unlisted.sh", "allow_scripts"), ("./scripts/link-out.sh", "outside"),
                              ("./../outside/evil.sh", "outside"), ("./scripts/../../../outside/evil.sh", "outside"),
                              (str(sandbox.outside / "evil.sh"), "outside"), ("./scripts/missing.sh", "allow_scripts")):
        with pytest.raises(Refused, match=reason):
            script_path(repo, requested, allowed)


def test_env_scrubbing_drops_credentials_and_git_steering() -> None:
    env = scrubbed_env({"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "x",
                        "AWS_SECRET_ACCESS_KEY": "x", "GITHUB_TOKEN": "x", "MY_PASSWORD": "x", "DB_PASSWD": "x",
                        "GIT_DIR": "/x", "GIT_EXTERNAL_DIFF": "x", "SSH_AUTH_SOCK": "/s", "LD_PRELOAD": "x",
                        "NODE_OPTIONS": "--require x", "BASH_ENV": "x", "SESSION_COOKIE": "x", "EDITOR": "vi"})
    assert {k for k in env if not k.startswith("GIT_") and k not in ("PAGER", "SSH_ASKPASS", "NO_COLOR", "TERM",
                                                                      "CI", "FORCE_COLOR")} == {"PATH", "HOME",
                                                                                                "EDITOR"}
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1" and "GIT_DIR" not in env


def test_git_overrides_neutralize_command_keys_and_refuse_includes() -> None:
    local = "core.fsmonitor\ntouch x\0filter.lfs.clean\nevil\0diff.pdf.textconv\nevil\0user.name\nme\0"
    assert git_overrides(local) == ["-c", "filter.lfs.clean=", "-c", "diff.pdf.textconv="]
    for refused in ("include.path\n/etc/x\0", "includeIf.gitdir:/x.path\n/y\0", "core.worktree\n/elsewhere\0"):
        with pytest.raises(Refused):
            git_overrides(refused)
    assert "core.fsmonitor=false" in GIT_HARDENING and "--no-pager" in GIT_HARDENING


@pytest.mark.parametrize("command", ["npm test && rm -rf /", "npm test; echo", "npm test | tee x", "echo $(id)",
                                     "echo `id`", "make > out", "echo ${HOME}", "run &", "'unterminated", "",
                                     "a\nb"])
def test_configured_commands_with_shell_syntax_are_refused(command: str) -> None:
    with pytest.raises(CommandsFileError):
        split_command(command, "commands.test")


def test_commands_yaml_shapes() -> None:
    parsed = parse_commands({"commands": {"test": "npm test -- --ci", "build": {"command": "./gradlew build",
                                                                              "timeout_s": 900}},
                             "allow_scripts": ["./scripts/ci.sh"]})
    assert parsed.commands["test"].argv == ("npm", "test", "--", "--ci")
    assert parsed.commands["build"].timeout_s == 900.0 and parsed.allow_scripts == ("./scripts/ci.sh",)
    for bad in ({"commands": ["npm test"]}, {"command": {}}, {"commands": {"Test!": "x"}},
                {"commands": {"test": {"command": "x", "shell": True}}}, {"allow_scripts": "./x.sh"},
                {"commands": {"test": {"command": "x", "timeout_s": -1}}}, "just text"):
        with pytest.raises(CommandsFileError):
            parse_commands(bad)


def test_commands_yaml_must_be_a_small_safe_file_inside_the_repo(sandbox: Sandbox) -> None:
    repo = sandbox.repo.resolve()
    assert load_project_commands(repo).commands["test"].argv == ("./tools/test.sh",)
    target = repo / ".daari" / "commands.yaml"
    for text in ("a: &x [1]\nb: *x\n", "commands: {test: " * 70 + "}" * 70, "x" * 70_000):
        target.write_text(text)
        with pytest.raises(CommandsFileError):
            load_project_commands(repo)
    target.unlink()
    (sandbox.outside / "commands.yaml").write_text('commands:\n  test: "../outside/evil.sh"\n')
    target.symlink_to(sandbox.outside / "commands.yaml")
    with pytest.raises(CommandsFileError, match="inside the repository"):
        load_project_commands(repo)


def test_plans_are_fixed_argument_lists(sandbox: Sandbox) -> None:
    repo, config, env = sandbox.repo.resolve(), sandbox.config(), sandbox.env
    status = plan_command(CommandMatch("DEV-01", "git_status", 1.0), repo, config, env)
    assert status.display == "git status" and status.git and status.ttl_s == 60 and status.cwd == repo
    assert status.argv[1:len(GIT_HARDENING) + 1] == GIT_HARDENING and status.argv[-2:] == ("status",
                                                                                         "--ignore-submodules=all")
    diff = plan_command(CommandMatch("DEV-02", "git_diff", 1.0, {"staged": "--cached"}), repo, config, env)
    assert diff.display == "git diff --staged" and "--no-ext-diff" in diff.argv and "--no-textconv" in diff.argv
    test = plan_command(CommandMatch("DEV-03", "test", 1.0), repo, config, env)
    assert test.argv == (str(repo / "tools" / "test.sh"),) and test.ttl_s == 300
    build = plan_command(CommandMatch("DEV-07", "rerun", 1.0, {"kind": "build"}), repo, config, env)
    assert build.intent == "build" and build.timeout_s == 30 and build.ttl_s == 600
    with pytest.raises(Unavailable, match="tools.eslint.command"):
        plan_command(CommandMatch("LT-01", "eslint", 1.0), repo, config, {"PATH": str(sandbox.outside)})
    with pytest.raises(Unavailable, match="tools.intellij.command"):
        plan_command(CommandMatch("LT-05", "rename", 1.0, {"old": "a", "new": "b"}), repo, config, env)


@pytest.mark.parametrize("tools", [{"allowed_roots": "/home"}, {"allowed_roots": [1]}, {"max_concurrency": 0},
                                   {"timeout_s": 0}, {"shell": True}, {"eslint": {"cmd": "eslint"}},
                                   {"ccs": {"ttl": 5}}])
def test_tools_config_mistakes_are_errors(tools: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        config_from_dict({"tools": tools})


def test_tools_are_off_and_rules_on_by_default() -> None:
    config = config_from_dict({})
    assert config.tools.enabled is False and config.rules.enabled is True
    assert (config.tools.ccs.git_ttl_s, config.tools.ccs.test_ttl_s, config.tools.ccs.build_ttl_s) == (60, 300, 600)
