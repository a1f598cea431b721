"""Settings: TOML + environment precedence, named errors, and keys from a .env file that are
used but never copied into the environment or the settings; the environment reaches settings only
through the CLI's loader, and the settings hash does not depend on the folder a build ran in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arcticqa.cli.app import load_cli_settings
from arcticqa.config import Settings, find_config_file, load_settings
from arcticqa.errors import ConfigError
from arcticqa.pipeline.export import input_identities

REPO = Path(__file__).resolve().parent.parent


def test_environment_overrides_the_toml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[build]\nbatch_size = 7\npaper_concurrency = 3\n', encoding="utf-8")
    monkeypatch.setenv("ARCTICQA_BUILD__BATCH_SIZE", "11")
    settings = load_cli_settings(cfg)
    assert (settings.build.batch_size, settings.build.paper_concurrency) == (11, 3)
    assert load_settings(cfg, environ={"ARCTICQA_BUILD__BATCH_SIZE": "11"}).build.batch_size == 11
    # the loader is handed an environment, it does not read one; Settings() reads none either
    assert load_settings(cfg).build.batch_size == 7
    assert Settings().build.batch_size == 50
    # overrides win over both, table by table
    both = load_settings(cfg, environ=os.environ, build={"paper_concurrency": 5})
    assert (both.build.batch_size, both.build.paper_concurrency) == (11, 5)


def test_the_cli_loader_finds_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_config_file(None, {}) is None and load_cli_settings().config_path is None
    (tmp_path / "arcticqa.toml").write_text("[build]\nbatch_size = 2\n", encoding="utf-8")
    (tmp_path / "b.toml").write_text("[build]\nbatch_size = 3\n", encoding="utf-8")
    (tmp_path / "c.toml").write_text("[build]\nbatch_size = 4\n", encoding="utf-8")
    assert load_cli_settings().build.batch_size == 2
    monkeypatch.setenv("ARCTICQA_CONFIG", "b.toml")
    assert load_cli_settings().build.batch_size == 3
    settings = load_cli_settings(Path("c.toml"))  # -c wins over $ARCTICQA_CONFIG
    assert settings.build.batch_size == 4 and settings.config_path == tmp_path / "c.toml"


def test_the_toml_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text("[build]\nbatch_size = 7\n", encoding="utf-8")
    reads: list[Path] = []
    real = Path.read_bytes

    def counted(path: Path) -> bytes:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    assert load_settings(cfg, environ={"ARCTICQA_BUILD__SEED": "s"}).build.seed == "s"
    assert reads.count(cfg) == 1


def test_config_path_is_the_loaders_not_a_setting(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('config_path = "/elsewhere.toml"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="config_path': set by the loader"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="not in the environment"):
        load_settings(environ={"ARCTICQA_CONFIG_PATH": "/elsewhere.toml"})
    cfg.write_text("", encoding="utf-8")
    loaded = load_settings(cfg)
    assert loaded.config_path == cfg.absolute()
    # it travels with the settings (the Prefect flow's parameter, a --workers helper's pickle)
    assert Settings.model_validate_json(loaded.model_dump_json()).config_path == cfg.absolute()


def test_settings_in_a_test_come_from_files_and_defaults_only(tmp_path: Path) -> None:
    """Run by the next test in a child pytest whose shell has ARCTICQA_BUILD__BATCH_SIZE=3."""
    assert not [n for n in os.environ if n.startswith("ARCTICQA_BUILD")]
    cfg = tmp_path / "a.toml"
    cfg.write_text("[build]\nseed = 'x'\n", encoding="utf-8")
    assert load_cli_settings(cfg).build.batch_size == 50
    assert load_settings(cfg).build.batch_size == 50


def test_a_stray_arcticqa_variable_does_not_reach_a_tests_settings(tmp_path: Path) -> None:
    env = {**os.environ, "ARCTICQA_BUILD__BATCH_SIZE": "3"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"{Path(__file__)}::test_settings_in_a_test_come_from_files_and_defaults_only"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_unknown_setting_and_bad_toml_are_named_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[build]\nbatchsize = 7\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"a\.toml: setting 'build\.batchsize'"):
        load_settings(cfg)
    cfg.write_text('[build\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_keys_from_an_env_file_are_used_but_not_exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCTICQA_DOTENV_TEST_KEY", raising=False)
    env = tmp_path / ".env"
    env.write_text("ARCTICQA_DOTENV_TEST_KEY=sk-from-dotenv-123456\n", encoding="utf-8")
    cfg = tmp_path / "a.toml"
    cfg.write_text(f'env_file = "{env}"\n[models.m]\nprovider = "openai"\nmodel = "x"\n'
                   f'api_key_env = "ARCTICQA_DOTENV_TEST_KEY"\n[roles]\nverifier = "m"\n', encoding="utf-8")
    settings = load_settings(cfg)
    assert settings.model_for("verifier").api_key() == "sk-from-dotenv-123456"
    assert "ARCTICQA_DOTENV_TEST_KEY" not in os.environ
    assert "sk-from-dotenv" not in settings.model_dump_json()
    monkeypatch.setenv("ARCTICQA_ENV_FILE", str(tmp_path / "nope.env"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="env file not found"):
        load_cli_settings()


def test_roles_left_unmapped_or_mapped_to_offline_work_beside_user_models(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text('[models.local]\nprovider = "openai"\nmodel = "m"\napi_key_env = ""\n'
                   '[roles]\nverifier = "local"\nsite_extractor = "offline"\n', encoding="utf-8")
    settings = load_settings(cfg)
    assert settings.model_for("verifier").model == "m"
    assert settings.model_for("site_extractor").provider == "offline"
    assert settings.model_for("question_writer").provider == "offline"
    assert settings.model_for("verifier").api_key() == "not-needed"


def test_refusal_and_length_re_ask_settings_are_validated(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    head = '[models.m]\nprovider = "openai"\nmodel = "x"\napi_key_env = ""\nmax_tokens = 1000\n'
    cfg.write_text(head + "max_refusal_reasks = 0\nmax_length_reasks = 2\nmax_tokens_ceiling = 3000\n",
                   encoding="utf-8")
    m = load_settings(cfg).models["m"]
    assert (m.max_refusal_reasks, m.max_length_reasks, m.max_tokens_ceiling) == (0, 2, 3000)
    for bad, named in [("max_refusal_reasks = -1", "max_refusal_reasks"), ("max_length_reasks = -1", "max_length_reasks"),
                       ("max_tokens_ceiling = 999", "below max_tokens")]:
        cfg.write_text(head + bad + "\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=named):
            load_settings(cfg)


def _demo_like(folder: Path, corpus: Path) -> Settings:
    """Settings like the demo's: absolute paths to a store, a data folder and a snapshot."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "demo.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{folder / "arcticqa.db"}"\n[build]\ndata_dir = "{folder / "data"}"\n'
                   f'source = "snapshot:{corpus}"\n', encoding="utf-8")
    return load_settings(cfg)


def test_the_settings_hash_does_not_depend_on_the_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "papers.jsonl", tmp_path / "b" / "c" / "papers.jsonl"
    for corpus in (first, second):
        corpus.parent.mkdir(parents=True)
        corpus.write_text('{"paperId": "p1"}\n', encoding="utf-8")
    one, two = _demo_like(tmp_path / "x", first), _demo_like(tmp_path / "y" / "z", second)
    assert one.fingerprint(input_identities(one)) == two.fingerprint(input_identities(two))
    # the inputs count by content: another snapshot is another hash
    second.write_text('{"paperId": "p2"}\n', encoding="utf-8")
    assert one.fingerprint(input_identities(one)) != two.fingerprint(input_identities(two))
    # a setting that changes outputs still counts
    seeded = one.model_copy(update={"build": one.build.model_copy(update={"seed": "other"})})
    assert seeded.fingerprint(input_identities(seeded)) != one.fingerprint(input_identities(one))


def test_a_folder_input_counts_by_its_path_relative_to_the_config_file(tmp_path: Path) -> None:
    def settings(folder: Path) -> Settings:
        (folder / "s2").mkdir(parents=True)
        cfg = folder / "arcticqa.toml"
        cfg.write_text(f'[build]\nsource = "s2-datasets:{folder / "s2"}"\n', encoding="utf-8")
        return load_settings(cfg)

    one, two = settings(tmp_path / "a"), settings(tmp_path / "b" / "c")
    assert input_identities(one) == {}
    assert one.fingerprint(input_identities(one)) == two.fingerprint(input_identities(two))
