"""HarnessSpec: every envs/<name>/spec.yaml validates, renders, and agrees with the install pins."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from pydantic import ValidationError

from openenv.capture.canonical import CanonicalRequest, Message, TextPart, Tool
from openenv.errors import NotFound
from openenv.harness.catalog import get_spec, harness_dir, harness_names
from openenv.harness.spec import HarnessSpec
from openenv.resources import harness_installer

TEN = {
    "claude-code",
    "codex",
    "opencode",
    "gemini-cli",
    "pi",
    "qwen-code",
    "mini-swe-agent",
    "hermes",
    "copilot",
    "cline",
}


def test_all_ten_harnesses_have_a_spec():
    assert TEN <= set(harness_names())


def test_pins_match_the_install_script():
    out = subprocess.run(
        ["bash", str(harness_installer()), "--pins"], capture_output=True, text=True, check=True
    ).stdout
    pins = {row.split()[0]: row.split()[1:5] for row in out.splitlines()}
    for name in harness_names():
        spec = get_spec(name)
        assert pins[name] == [
            spec.install.method,
            spec.install.package,
            spec.install.version,
            spec.install.bin,
        ], name


@pytest.mark.parametrize("name", harness_names())
def test_spec_renders_without_leftover_placeholders(name, session_context):
    spec, ctx = get_spec(name), session_context
    argv = spec.argv(ctx)
    assert argv[0] == spec.install.bin
    assert "Fix $HOME's bug" in argv, "the instruction is one argument, taken literally"
    for path in spec.write_config(ctx):
        assert path.is_relative_to(ctx.home)
        assert "${" not in path.read_text()
    rendered = json.dumps({"env": spec.environment(ctx), "argv": argv, "setup": spec.setup_argvs(ctx)})
    assert "${" not in rendered
    assert "127.0.0.1:4321/s/tok" in rendered + "".join(p.read_text() for p in spec.write_config(ctx))


def test_a_runtime_pin_belongs_to_its_install_method():
    raw = yaml.safe_load((harness_dir("pi") / "spec.yaml").read_text())
    with pytest.raises(ValidationError, match="python: only pip harnesses"):
        HarnessSpec.model_validate({**raw, "install": {**raw["install"], "python": "3.12"}})


def test_at_least_sixteen_harnesses():
    assert len(harness_names()) >= 16, harness_names()


def test_a_source_file_is_copied_verbatim_from_beside_the_spec(session_context):
    spec, ctx = get_spec("terminus-2"), session_context
    [launcher] = spec.write_config(ctx)
    assert launcher.read_text() == (harness_dir("terminus-2") / "terminus2_launcher.py").read_text()
    raw = yaml.safe_load((harness_dir("terminus-2") / "spec.yaml").read_text())
    with pytest.raises(ValidationError, match="read by load_spec"):
        HarnessSpec.model_validate(raw)  # not through load_spec: the source was never read


def test_a_text_protocol_needs_both_replies():
    raw = yaml.safe_load((harness_dir("pi") / "spec.yaml").read_text())
    with pytest.raises(ValidationError, match="go together"):
        HarnessSpec.model_validate({**raw, "shell_tool": {**raw["shell_tool"], "reply": "${arguments}"}})


def test_json_and_yaml_config_files_parse(session_context):
    ctx = session_context
    opencode = get_spec("opencode").write_config(ctx)[0]
    assert json.loads(opencode.read_text())["provider"]["openenv"]["models"]["tiny"]["tool_call"] is True
    hermes = get_spec("hermes").write_config(ctx)[0]
    assert yaml.safe_load(hermes.read_text())["model"]["base_url"] == "http://127.0.0.1:4321/s/tok/v1"


def test_shell_tool_arguments_carry_the_command():
    assert get_spec("cline").shell_tool.call_arguments("ls") == {"commands": ["ls"]}
    assert get_spec("codex").shell_tool.call_arguments("ls") == {"cmd": "ls"}


@pytest.mark.parametrize("name", ["pi", "codex", "claude-code", "gemini-cli", "cline", "terminus-2"])
def test_the_command_a_call_runs_is_read_back_in_every_harness_shape(name: str):
    tool = get_spec(name).shell_tool
    assert tool.command_in(tool.call_arguments("ls -la")) == "ls -la"


def test_a_call_without_the_command_argument_reads_as_no_command():
    assert get_spec("codex").shell_tool.command_in({"command": "ls"}) == ""  # codex's argument is `cmd`
    assert get_spec("cline").shell_tool.command_in({"commands": "ls"}) == ""  # not the list its schema has
    assert get_spec("pi").shell_tool.command_in({"command": ["ls"]}) == ""


def test_aux_rules_tag_opencode_title_requests_only():
    spec = get_spec("opencode")
    title = CanonicalRequest(
        messages=(
            Message(
                role="system", parts=(TextPart(text="You are a title generator. You output ONLY a title"),)
            ),
            Message(role="user", parts=(TextPart(text="fix it"),)),
        )
    )
    main = title.model_copy(update={"tools": (Tool(name="bash"),)})
    assert spec.aux_reason(title) == "title generator"
    assert spec.aux_reason(main) is None


def test_command_must_start_with_the_installed_bin():
    raw = yaml.safe_load((harness_dir("pi") / "spec.yaml").read_text())
    raw["command"][0] = "node"
    with pytest.raises(ValidationError, match="must start with the installed bin 'pi'"):
        HarnessSpec.model_validate(raw)


def test_unknown_field_is_rejected():
    raw = yaml.safe_load((harness_dir("pi") / "spec.yaml").read_text())
    with pytest.raises(ValidationError, match="comand"):
        HarnessSpec.model_validate({**raw, "comand": ["pi"]})


def test_unknown_harness_lists_known_ones():
    with pytest.raises(NotFound, match="claude-code"):
        get_spec("nope")


def test_gemini_scripts_travel_base64_encoded_and_one_liners_stay_plain():
    import base64

    tool = get_spec("gemini-cli").shell_tool
    script = 'cat > a.py <<\'EOF\'\n"""Uses `backticks`."""\nEOF\n'
    command = tool.call_arguments(script)["command"]
    assert "`" not in command and command.startswith("echo ") and command.endswith(" | base64 -d | sh")
    assert base64.b64decode(command.split()[1]).decode() == script
    assert tool.call_arguments("ls -la")["command"] == "ls -la"


def test_the_long_variant_applies_the_recipe_once_and_a_harness_without_one_is_refused():
    spec = get_spec("claude-code")
    recipe = spec.long_episode
    assert recipe is not None and recipe.sub_agent is not None and recipe.sub_agent.name == "Agent"
    variant = spec.long_variant()
    assert "--bare" in spec.command and "--bare" not in variant.command
    assert variant.command[-len(recipe.add_args) :] == recipe.add_args
    assert variant.env == {**spec.env, **recipe.env} and variant.long_episode is None
    with pytest.raises(ValueError, match="no long_episode recipe"):
        variant.long_variant()  # applied once, not twice
    assert {name for name in harness_names() if get_spec(name).long_episode} == {
        "claude-code",
        "opencode",
        "codex",
    }
