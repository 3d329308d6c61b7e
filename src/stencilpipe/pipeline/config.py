"""The pipeline configuration: a YAML file validated by pydantic models.

```yaml
input: data/sample/*.tif
output: out/sample/
stages:
  - gaussian: {sigma: 1.0}
  - mean: {size: 3, boundary: nearest}
  - stencil: my_kernels:smooth
boundary: reflect
cluster: {n_workers: 2, threads_per_worker: 1}
resume: true
```

Errors name the key path and, when the YAML file is known, its line:
``run.yaml:4: stages.0.gaussian.sigma: Input should be a valid number``.

Relative paths in a config file (input, output, report, the TLS files of
``cluster.security``, ``file.py`` stencils) resolve against the file's folder, whatever
the working directory, as docker compose does; values given on the command line
(``--set``) resolve against the working directory.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    NonNegativeInt,
    PositiveInt,
    Tag,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .. import library, ndmorph
from ..errors import ConfigError
from ..stencils.boundary import MODES

__all__ = [
    "ClusterConfig",
    "SecurityConfig",
    "PipelineConfig",
    "load_config",
    "parse_config",
    "apply_overrides",
]

Mode = Literal[MODES]  # type: ignore[valid-type]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The batch systems of dask-jobqueue (``cluster.jobqueue``).
JOBQUEUE_SYSTEMS = ("slurm", "pbs", "sge", "lsf", "htcondor", "moab", "oar")

_CertPath = Annotated[str, Field(min_length=1)]


class SecurityConfig(_Strict):
    """TLS certificates (PEM files), under the names of ``distributed.Security``'s arguments.

    The client's certificate is also the embedded (or dask-jobqueue) scheduler's and
    workers' unless ``tls_scheduler_cert`` / ``tls_worker_cert`` name their own.
    A ``*_key`` left out means the key is in the certificate file.
    """

    tls_ca_file: _CertPath = Field(description="the CA certificate that signed every party's")
    tls_client_cert: _CertPath = Field(description="this client's certificate")
    tls_client_key: _CertPath | None = None
    tls_scheduler_cert: _CertPath | None = Field(None, description="default: tls_client_cert")
    tls_scheduler_key: _CertPath | None = None
    tls_worker_cert: _CertPath | None = Field(None, description="default: tls_client_cert")
    tls_worker_key: _CertPath | None = None
    require_encryption: bool = Field(True, description="refuse unencrypted connections")

    @model_validator(mode="after")
    def _keys_have_certificates(self) -> SecurityConfig:
        for role in ("scheduler", "worker"):
            if getattr(self, f"tls_{role}_key") and not getattr(self, f"tls_{role}_cert"):
                raise PydanticCustomError(
                    "key_without_cert",
                    f"tls_{role}_key needs tls_{role}_cert (the certificate of that key)",
                )
        return self


class AdaptConfig(_Strict):
    """Adaptive scaling of batch jobs: as many as the queued work needs, within bounds."""

    minimum: NonNegativeInt = Field(0, description="jobs kept while the run lasts")
    maximum: PositiveInt = Field(description="jobs at most")

    @model_validator(mode="after")
    def _bounds_in_order(self) -> AdaptConfig:
        if self.minimum > self.maximum:
            raise PydanticCustomError(
                "adapt_bounds",
                f"minimum ({self.minimum}) is above maximum ({self.maximum})",
            )
        return self


#: Fields of the embedded cluster that a dask-jobqueue cluster does not use.
_EMBEDDED_ONLY = ("n_workers", "threads_per_worker", "processes")


class ClusterConfig(_Strict):
    """Where the pipeline runs: an embedded LocalCluster, an existing scheduler, or batch jobs."""

    address: str | None = Field(None, description="scheduler address; null = embedded LocalCluster")
    n_workers: PositiveInt = 2
    threads_per_worker: PositiveInt = 1
    processes: bool = True
    dashboard_address: str | None = Field(
        "127.0.0.1:0",
        description="host:port of the embedded (or jobqueue) scheduler's dashboard; "
        "null = no dashboard",
    )
    timeout: float = Field(
        10.0,
        gt=0,
        description="seconds to wait for a remote scheduler, for the first worker of batch "
        "jobs, and before a run that lost every worker ends",
    )
    gpu: bool = Field(False, description="start dask-cuda's LocalCUDACluster, one worker per GPU")
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "critical",
        description="the embedded cluster's own log lines on stderr; failures are listed in "
        "the run's summary whatever this says",
    )
    jobqueue: Literal[JOBQUEUE_SYSTEMS] | None = Field(  # type: ignore[valid-type]
        None, description="run the workers as batch jobs of this system (dask-jobqueue)"
    )
    jobs: PositiveInt = Field(1, description="batch jobs to submit (cluster.scale(jobs=...))")
    adapt: AdaptConfig | None = Field(
        None,
        description="instead of a fixed number of jobs, between minimum and maximum jobs as "
        "the queued work needs (cluster.adapt(minimum_jobs=..., maximum_jobs=...))",
    )
    job: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of the dask-jobqueue cluster class: cores, memory, "
        "queue, walltime, account, job_extra_directives, ...",
    )
    security: SecurityConfig | None = Field(None, description="TLS; null = plain tcp://")

    @field_validator("jobqueue")
    @classmethod
    def _jobqueue_alone(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("address"):
            raise PydanticCustomError(
                "jobqueue_and_address",
                "a jobqueue cluster starts its own scheduler; leave out cluster.address "
                "(or cluster.jobqueue, to use the scheduler at that address)",
            )
        if value and info.data.get("gpu"):
            raise PydanticCustomError(
                "jobqueue_and_gpu",
                "cluster.gpu starts GPU workers on this machine; for GPU batch jobs set "
                "gpu: false, request GPUs in cluster.job (e.g. job_extra_directives: "
                "['--gres=gpu:1']) and set backend: cupy",
            )
        return value

    @model_validator(mode="after")
    def _jobqueue_fields_fit(self) -> ClusterConfig:
        if self.jobqueue:
            used = [f"cluster.{name}" for name in _EMBEDDED_ONLY if name in self.model_fields_set]
            if used:
                raise PydanticCustomError(
                    "embedded_only",
                    f"{', '.join(used)} {'applies' if len(used) == 1 else 'apply'} to the "
                    f"embedded cluster, not to jobqueue: {self.jobqueue}; size the jobs with "
                    "cluster.jobs and cluster.job (cores, memory, processes)",
                )
            if self.adapt and "jobs" in self.model_fields_set:
                raise PydanticCustomError(
                    "jobs_and_adapt",
                    "cluster.jobs is a fixed number of jobs, cluster.adapt a range: give one",
                )
        else:
            given = [
                f"cluster.{name}"
                for name in ("jobs", "job", "adapt")
                if name in self.model_fields_set
            ]
            if given:
                raise PydanticCustomError(
                    "jobqueue_missing",
                    f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                    f"cluster.jobqueue (one of: {', '.join(JOBQUEUE_SYSTEMS)})",
                )
        return self


#: ``module:name`` or ``file.py:name``.
_REFERENCE = r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$"


def _check_reference(value: str) -> str:
    if not re.match(_REFERENCE, value):
        raise PydanticCustomError(
            "stencil_reference",
            f"{value!r} is not a stencil reference; expected module:name or file.py:name",
        )
    return value


_Reference = Annotated[str, AfterValidator(_check_reference)]


class StencilRef(_Strict):
    """A user's ``@stencil`` by import path (``module:name`` or ``file.py:name``)."""

    path: _Reference
    boundary: Mode | None = None
    cval: float | None = None


def _reference_form(value: Any) -> str | None:
    if isinstance(value, dict | StencilRef):
        return "mapping"
    return "reference" if isinstance(value, str) else None


#: ``- stencil: file.py:name`` or ``- stencil: {path: file.py:name, boundary: ..., cval: ...}``.
_StencilSpec = Annotated[
    Annotated[StencilRef, Tag("mapping")] | Annotated[_Reference, Tag("reference")],
    Discriminator(
        _reference_form,
        custom_error_type="stencil_spec",
        custom_error_message="expected module:name, file.py:name or a mapping "
        "{path: ..., boundary: ..., cval: ...}",
    ),
]


_OPTION_FIELDS = {
    "boundary": (Mode | None, None),
    "cval": (float | None, None),
    "dtype": (str | None, None),
}


def _params_model(name: str, factory: Any) -> type[BaseModel]:
    """A strict model of a library filter's parameters, read off its signature."""
    hints = typing.get_type_hints(factory)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(factory).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            fields.update(_OPTION_FIELDS)
            continue
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    return create_model(
        f"{name}_params", __config__=ConfigDict(extra="forbid", frozen=True), **fields
    )


def _stage_models() -> dict[str, type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {}
    for name, factory in {**library.FILTERS, **ndmorph.STAGES}.items():
        models[name] = create_model(
            f"{name}_stage",
            __config__=ConfigDict(extra="forbid", frozen=True),
            **{name: (_params_model(name, factory), ...)},
        )
    models["stencil"] = create_model(
        "stencil_stage",
        __config__=ConfigDict(extra="forbid", frozen=True),
        stencil=(_StencilSpec, ...),
    )
    return models


_STAGES = _stage_models()


def _stage_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value in _STAGES else None
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if key in _STAGES else None
    if isinstance(value, BaseModel):
        return next(iter(type(value).model_fields))
    return None


def _normalise_stage(value: Any) -> Any:
    """``- laplace`` and ``- laplace: null`` mean ``- laplace: {}``."""
    if isinstance(value, str) and value in _STAGES:
        return {value: {}}
    if isinstance(value, dict) and len(value) == 1:
        key, params = next(iter(value.items()))
        if params is None and key != "stencil":
            return {key: {}}
    return value


Stage = Annotated[
    Union[tuple(Annotated[model, Tag(name)] for name, model in _STAGES.items())],  # noqa: UP007
    Discriminator(
        _stage_tag,
        custom_error_type="unknown_stage",
        custom_error_message=f"unknown stage; expected one of: {', '.join(_STAGES)}",
        custom_error_context={"stages": ", ".join(_STAGES)},
    ),
]


def _one_chunks_message(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One message for a bad ``chunks``, not one per branch of its union."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError(
            "chunks",
            "expected auto, frames per chunk (a positive integer) or chunks per axis "
            "(a list of positive integers or -1)",
        ) from None


Chunks = Annotated[
    Literal["auto"] | PositiveInt | list[PositiveInt | Literal[-1]],
    WrapValidator(_one_chunks_message),
]


def _is_path_key(key: tuple[str, ...]) -> bool:
    """Whether the config key at ``key`` holds a file system path."""
    return key in (("input",), ("output",), ("report",)) or (
        len(key) == 3 and key[:2] == ("cluster", "security") and key[2].startswith("tls_")
    )


def _absolute(value: Any, base_dir: str | os.PathLike[str]) -> Any:
    """``value`` (a path) made absolute against ``base_dir`` and normalised, keeping a trailing
    slash (``out/`` names a directory); URLs and non-strings as they are."""
    if not isinstance(value, str) or not value or "://" in value:
        return value
    path = os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))
    return path + os.sep if value.endswith(("/", os.sep)) else path


def _resolve_paths(data: dict[str, Any], base_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``data`` with its path keys absolute against ``base_dir`` (others untouched)."""
    data = {k: _absolute(v, base_dir) if _is_path_key((k,)) else v for k, v in data.items()}
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("security"), dict):
        tls = {
            key: _absolute(value, base_dir) if _is_path_key(("cluster", "security", key)) else value
            for key, value in cluster["security"].items()
        }
        data["cluster"] = {**cluster, "security": tls}
    return data


class PipelineConfig(_Strict):
    """A whole run: what to read, the stages, where to write, where to run.

    Relative paths (input, output, report, TLS files) are made absolute against
    ``base_dir`` when the config is validated.
    """

    input: str
    output: str
    stages: list[Stage] = Field(min_length=1)  # type: ignore[valid-type]
    boundary: Mode = "reflect"
    backend: Literal["numpy", "cupy", "auto"] = "numpy"
    #: ``auto``, frames per chunk, or Dask chunks per axis (``[4, 512, 512]``: tiles).
    chunks: Chunks = "auto"
    cluster: ClusterConfig = ClusterConfig()
    #: Where to save Dask's performance report (HTML) of each run; null = none.
    report: str | None = None
    resume: bool = True
    #: Leave out unreadable or mismatched input files (listed) instead of stopping.
    skip_bad: bool = False
    compression: str | None = None
    #: OME-Zarr outputs: how many resolution levels (each halves y and x).
    levels: PositiveInt = 1
    #: Zarr outputs: 3 (OME-NGFF 0.5), or 2 (OME-NGFF 0.4) for readers that need it.
    zarr_format: Literal[2, 3] = 3
    #: Zarr 3 outputs: one shard per block holding one chunk per 2-D frame (few objects).
    zarr_shards: bool = False
    #: fsspec options for ``input``/``output`` URLs (``endpoint_url``, ``profile``, ``anon``,
    #: ``region_name``...), as dask's readers take them. Never printed nor dumped: keep
    #: secrets in the usual environment variables and files rather than here.
    storage_options: dict[str, Any] = Field(default_factory=dict, repr=False, exclude=True)
    #: ``batch``: no fsync per output, one flush of the file system when the run ends (outputs
    #: a crash left unflushed fail resume's checksums and are recomputed); ``per-file``: each
    #: output is fsync'd before it is renamed into place; ``none``: no flush at all, the
    #: operating system writes the outputs back in its own time (a crash can lose outputs
    #: the run reported written: a rerun finds them by their checksums and writes them again).
    durability: Literal["batch", "per-file", "none"] = "batch"
    #: Run the stages over cache-sized row strips (see :mod:`stencilpipe.stencils.fused`).
    fuse: bool = True
    #: Directory that relative paths and stencil files (``file.py:name``) resolve against:
    #: the config file's.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _paths_from_base_dir(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        base_dir = data.get("base_dir") or Path.cwd()
        return {**_resolve_paths(data, base_dir), "base_dir": base_dir}

    def stage_specs(self) -> list[tuple[str, dict[str, Any]]]:
        """``(name, parameters)`` of each stage, without unset options."""
        specs = []
        for stage in self.stages:
            ((name, params),) = stage.model_dump(exclude_none=True).items()
            specs.append((name, params))
        return specs


def _yaml_lines(text: str) -> dict[tuple, int]:
    """Line (1-based) of each key path in a YAML document, from the composed node tree."""
    lines: dict[tuple, int] = {}

    def walk(node: yaml.Node, path: tuple) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines[path + (key.value,)] = key.start_mark.line + 1
                walk(value, path + (key.value,))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, path + (index,))

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return lines
    if root is not None:
        walk(root, ())
    return lines


def _data_path(loc: tuple, data: Any) -> tuple:
    """The part of a pydantic error location that exists in the data.

    Locations also name union branches (``stages.0.gaussian.gaussian.sigma.float``):
    keep the keys and indices found in the input, drop the rest.
    """
    path: list = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        elif isinstance(node, dict) and part not in node and len(path) == len(loc) - 1:
            path.append(part)  # an unknown or missing key: name it
            break
        else:
            continue
        path.append(part)
    return tuple(path)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class inside a field's annotation (``X | None``, a tagged union), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, typing.get_args(annotation))), None)


def _keys_at(path: tuple) -> list[str]:
    """The keys that the mapping at ``path`` (a key path in the data) accepts."""
    model: type[BaseModel] | None = PipelineConfig
    parts = list(path)
    while parts and model is not None:
        part = parts.pop(0)
        if model is PipelineConfig and part == "stages" and len(parts) >= 2:
            name = parts[1]
            parts = parts[2:]
            stage = _STAGES.get(name)
            model = _model_in(stage.model_fields[name].annotation) if stage else None
        else:
            field = model.model_fields.get(part)
            model = _model_in(field.annotation) if field else None
    if model is None or parts:
        return []
    return [name for name, field in model.model_fields.items() if not field.exclude]


def _nearest(given: Any, valid: list[str], what: str) -> str:
    """``did you mean 'x'?`` when a valid name is close to ``given``, else the valid names."""
    close = difflib.get_close_matches(str(given), valid, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"expected one of: {', '.join(valid)}" if valid else f"no {what} is allowed here"


def _unknown_stage(given: Any) -> str:
    if isinstance(given, dict) and len(given) > 1:
        return (
            f"one stage per list item, as a name or {{name: {{parameters}}}}; this item has "
            f"{len(given)} names: {', '.join(map(str, given))}"
        )
    if isinstance(given, dict) and given:
        given = next(iter(given))
    if not isinstance(given, str):
        return (
            f"expected a stage name or {{name: {{parameters}}}} (e.g. - mean: {{size: 3}}), "
            f"got {given!r}"
        )
    return f"unknown stage {given!r}; {_nearest(given, list(_STAGES), 'stage')}"


def _message(item: Any, key: tuple) -> str:
    """One line of plain words for one pydantic error (no pydantic type or class names)."""
    kind = item["type"]
    if kind == "extra_forbidden":
        return f"unknown key; {_nearest(key[-1], _keys_at(key[:-1]), 'key')}"
    if kind == "unknown_stage":
        return _unknown_stage(item.get("input"))
    # storage_options may hold credentials: its values are never echoed
    given = "a value (not shown)" if "storage_options" in key else repr(item.get("input"))
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping (key: value), got {given}"
    if kind == "list_type":
        return f"expected a list (- item), got {given}"
    message = item["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


def _misspelt(errors: list[Any], data: Any) -> set[tuple]:
    """Required keys that an unknown key beside them misspells (said once, as the unknown key)."""
    paths = [(item["type"], _data_path(tuple(item["loc"]), data)) for item in errors]
    unknown = [path for kind, path in paths if kind == "extra_forbidden" and path]
    return {
        path
        for kind, path in paths
        if kind == "missing"
        and any(
            u[:-1] == path[:-1] and difflib.get_close_matches(str(u[-1]), [str(path[-1])])
            for u in unknown
        )
    }


def _format_errors(error: ValidationError, data: Any, source: str, lines: dict[tuple, int]) -> str:
    messages: dict[tuple, str] = {}
    errors = error.errors()
    misspelt = _misspelt(errors, data)
    for item in errors:
        cleaned = _data_path(tuple(item["loc"]), data)
        if cleaned in messages or cleaned in misspelt:
            continue  # one message per key: the first union branch's
        key = ".".join(str(p) for p in cleaned) or "(top level)"
        prefix = next(
            (cleaned[:n] for n in range(len(cleaned), -1, -1) if cleaned[:n] in lines), None
        )
        where = f"{source}:{lines[prefix]}: " if prefix is not None else f"{source}: "
        messages[cleaned] = f"{where}{key}: {_message(item, cleaned)}"
    return "\n".join(messages.values())


def parse_config(
    data: Any, *, source: str = "<config>", text: str | None = None, base_dir: Path | None = None
) -> PipelineConfig:
    """Validate a configuration given as a mapping.

    Parameters
    ----------
    data : mapping
        The parsed YAML.
    source : str
        Name used in messages (the file's path).
    text : str, optional
        The YAML text, to report line numbers.
    base_dir : Path, optional
        Directory that relative paths are resolved against (default: the working
        directory).

    Raises
    ------
    ConfigError
        One line per problem: ``source:line: key.path: message``.
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a pipeline config is a mapping of keys (input, output, stages, ...)"
        )
    data = dict(data)
    if isinstance(data.get("stages"), list):
        data["stages"] = [_normalise_stage(s) for s in data["stages"]]
    if base_dir is not None:
        data["base_dir"] = base_dir
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_errors(error, data, source, _yaml_lines(text or ""))) from None


def apply_overrides(
    data: dict[str, Any], overrides: list[str], base_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a raw config mapping.

    With ``base_dir`` (the working directory of a command line), the values of path keys
    (input, output, report, TLS files) are made absolute against it.
    """
    data = yaml.safe_load(yaml.safe_dump(data))  # a deep copy
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key:
            raise ConfigError(
                f"--set {override!r}: expected key=value, e.g. --set cluster.n_workers=4"
            )
        target = data
        parts = key.split(".")
        for part in parts[:-1]:
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            elif isinstance(target, dict):
                target = target.setdefault(part, {})
            else:
                raise ConfigError(f"--set {override!r}: {part!r} is not a mapping in the config")
        last = parts[-1]
        value = yaml.safe_load(raw) if raw else None
        if base_dir is not None and _is_path_key(tuple(parts)):
            value = _absolute(value, base_dir)
        if isinstance(target, list) and last.isdigit() and int(last) < len(target):
            target[int(last)] = value
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise ConfigError(f"--set {override!r}: cannot set {last!r} there")
    return data


def load_config(path: str | Path, overrides: list[str] = ()) -> PipelineConfig:  # type: ignore[assignment]
    """Read, override and validate a YAML pipeline config file.

    Relative paths in the file resolve against its folder; those in ``overrides`` (given on
    a command line) against the working directory.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    if overrides and isinstance(data, dict):
        data = apply_overrides(data, list(overrides), base_dir=Path.cwd())
    return parse_config(data, source=str(path), text=text, base_dir=path.resolve().parent)
