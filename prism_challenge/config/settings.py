"""Every configuration key of a PRISM node, grouped by the stage that reads it.

Defaults are the demo / CI profile of docs/validators.md (2 CPU cores, demo corpus, SQLite,
bubblewrap, dry-run weights); `config.example.yaml` lists every key with the production
value beside it. Unknown keys are errors, never silently ignored. Secrets are not keys:
a key names the environment variable that holds the secret.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class Section(BaseModel):
    """A config section: unknown keys are refused so typos fail loudly."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StorageSettings(Section):
    url: str = "sqlite:///prism-data/prism.db"


def endpoint_of(network: str) -> str:
    """The websocket endpoint bittensor connects to for a network name or URL."""
    from bittensor.settings import resolve_endpoint

    return resolve_endpoint(network)[1]


def network_error(network: str) -> str | None:
    """None for a network bittensor can connect to, else one line naming the valid ones.
    Without bittensor (a base install: config and store only) there is nothing to check
    against; every command that reaches a chain needs the [miner] extra and checks there."""
    try:
        from bittensor.settings import NETWORKS
    except ImportError:
        return None

    if network in NETWORKS or network.startswith(("ws://", "wss://")):
        return None
    return (f"unknown network {network!r}: use one of {', '.join(sorted(NETWORKS))} "
            f"or a ws:// / wss:// endpoint")


def chain_on_this_host(network: str) -> bool:
    """The network's endpoint is a loopback address (a local chain, `network: local`)."""
    from urllib.parse import urlparse

    host = urlparse(endpoint_of(network)).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def unservable(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, *, same_host: bool
               ) -> str | None:
    """Why `ip` is no axon address, or None. The chain's ServeAxon refuses 127.0.0.1, ::1,
    255.255.255.255 and ffff:...:ffff (InvalidIpAddress), which a node would retry every
    poll for ever; it stores the unspecified address (0.0.0.0, ::) and the rest of the
    loopback range, which name no host a miner can reach, unless the chain and its miners
    run on this host (`same_host`: loopback then reaches them)."""
    if ip in (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1")):
        return "a loopback address the chain refuses (InvalidIpAddress)"
    if int(ip) in (2**32 - 1, 2**128 - 1):
        return "the broadcast address, which the chain refuses (InvalidIpAddress)"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_unspecified:
        return "the unspecified address, which names no host a miner can reach"
    if ip.is_loopback and not same_host:
        return "a loopback address, which only this host can reach"
    return None


class ChainSettings(Section):
    netuid: int = Field(1, ge=0)
    network: str = "finney"
    mode: Literal["local", "online"] = "local"
    metagraph_file: Path | None = None
    allow_any_hotkey: bool = True
    local_ledger: Path = Path("prism-data/local-chain.db")
    refresh_blocks: int = Field(5, ge=1)
    poll_s: float = Field(12.0, gt=0)
    timeout_s: float = Field(30.0, gt=0)
    period_blocks: int = Field(16, ge=4, le=4096)
    retries: int = Field(3, ge=0, le=20)
    backoff_s: float = Field(2.0, ge=0)
    commitment_wait_s: float = Field(36.0, ge=0, le=600)
    serve_address: str | None = None

    @model_validator(mode="after")
    def _serve_address_is_ip_port(self) -> ChainSettings:
        # only a node that goes online uses the network (checking it imports bittensor,
        # most of a second, in every process that reads the settings)
        if self.mode == "online" and (problem := network_error(self.network)) is not None:
            raise ValueError(f"chain.network: {problem}")
        if self.serve_address is not None:
            host, _, port = self.serve_address.rpartition(":")
            try:
                ip = ipaddress.ip_address(host.strip("[]"))
                ok = 0 < int(port) < 65536
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"chain.serve_address must be ip:port (a public IP address, "
                                 f"not a name), not {self.serve_address!r}")
            if self.mode != "online":
                return self  # the local ledger publishes any address
            same_host = chain_on_this_host(self.network)
            if (kind := unservable(ip, same_host=same_host)) is not None:
                other = (f", or with a chain on this host another loopback address such as "
                         f"127.0.0.2:{port} (intake.host 127.0.0.2 or 0.0.0.0)"
                         if same_host else "")
                raise ValueError(
                    f"chain.serve_address {self.serve_address} is {kind}: set it to this "
                    f"host's public IP address and the intake port (e.g. 203.0.113.7:{port})"
                    f"{other}, or leave it unset")
        return self


class WalletSettings(Section):
    name: str = "default"
    hotkey: str = "default"
    path: str = "~/.bittensor/wallets"


class DataSettings(Section):
    root: Path = Path("prism-data/data")
    manifest: Path = Path("data_manifests/demo.json")


class ChallengeSettings(Section):
    seq_len: int = Field(128, ge=8, le=65536)
    token_budget: int = Field(294_912, ge=1)  # 2,304 rows of 128: whole rows only
    deadline_s: float = Field(300.0, gt=0)
    param_cap: int = Field(150_000_000, ge=1)
    seed: int = 1337
    # Contiguous stretches of text the stream interleaves; a step takes fewer rows than this.
    stream_lanes: int = Field(256, ge=2)

    @model_validator(mode="after")
    def _budget_is_whole_rows(self) -> ChallengeSettings:
        # Every run consumes exactly the same rows, so the budget must be whole rows.
        if self.token_budget % self.seq_len:
            low = self.token_budget // self.seq_len * self.seq_len
            raise ValueError(
                f"token_budget {self.token_budget} is not a multiple of seq_len {self.seq_len}"
                f" (nearest: {low or self.seq_len} or {low + self.seq_len})"
            )
        return self


class IntakeSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_body_bytes: int = Field(262_144, ge=1024)
    freshness_s: float = Field(300.0, gt=0)
    rate_limit_count: int = Field(5, ge=1)
    rate_limit_window_s: float = Field(3600.0, gt=0)


class LlmSettings(Section):
    enabled: bool = True
    base_url: str = "https://openrouter.ai/api/v1"
    model: str = "openai/gpt-4o-mini"
    api_key_env: str = "OPENROUTER_API_KEY"
    timeout_s: float = Field(60.0, gt=0)
    backoff_s: float = Field(30.0, gt=0)
    max_backoff_s: float = Field(3600.0, gt=0)
    response_format: Literal["json_schema", "json_object"] = "json_schema"
    max_output_tokens: int = Field(1024, ge=64)
    temperature: float = Field(0.0, ge=0, le=2)


class GatesSettings(Section):
    """Pre-GPU gates: duplicate detection and how much one pass handles."""

    duplicate_threshold: float = Field(0.85, gt=0, le=1)
    batch_size: int = Field(32, ge=1)
    settle_s: float = Field(0.0, ge=0, le=3600)


class SandboxSettings(Section):
    backend: Literal["bubblewrap", "docker", "none"] = "bubblewrap"
    nproc_per_node: int = Field(1, ge=1, le=64)
    memory_bytes: int = Field(8 * 2**30, ge=2**26)
    pids_max: int = Field(256, ge=8)
    disk_bytes: int = Field(2 * 2**30, ge=2**20)
    output_bytes: int = Field(1 * 2**20, ge=4096)
    startup_grace_s: float = Field(120.0, gt=0)
    save_grace_s: float = Field(60.0, gt=0)
    eval_time_s: float = Field(300.0, gt=0)
    # GPU hosts: held-out task processes preparing ahead (each makes its own CUDA context),
    # and whether they load the common kernels while they wait (docs/sandbox.md)
    eval_gpu_spares: int = Field(3, ge=1, le=32)
    eval_gpu_warmup: bool = True
    cpu_threads: int = Field(2, ge=1)
    # bubblewrap: start each sandbox's program as a fork of one interpreter that imported
    # torch once (docs/sandbox.md, "The prewarmed interpreter"); false starts every one cold
    prewarm: bool = True
    # torch.use_deterministic_algorithms and cuDNN's deterministic flag in every sandbox
    # (seeds are set either way). The run's stack records it: a replay under the other mode
    # is not comparable (docs/sandbox.md, "Determinism").
    deterministic_algorithms: bool = True
    docker_image: str = "prism-challenge:latest"
    gpus: list[str] = Field(default_factory=list)


class EarlyStopSettings(Section):
    """Stopping, at fixed checkpoints, a run that can no longer take the lead."""

    enabled: bool = True
    checkpoints: list[float] = Field(default_factory=lambda: [0.2, 0.4, 0.6, 0.8])
    max_gain: float = Field(0.5, gt=0, lt=1)
    recent: float = Field(0.05, gt=0, lt=1)

    @model_validator(mode="after")
    def _fractions(self) -> EarlyStopSettings:
        if any(not 0 < f < 1 for f in self.checkpoints):
            raise ValueError("scoring.early_stop.checkpoints must be fractions in (0, 1)")
        return self


class ScoringSettings(Section):
    epsilon_bpb: float = Field(0.001, ge=0)
    dethrone_margin: float = Field(0.005, ge=0, lt=1)
    # and by dethrone_z standard errors of the paired difference of the two runs' bpb, over
    # dethrone_windows equal stretches of the stream (scoring/leaderboard.py: paired_se)
    dethrone_z: float = Field(2.0, ge=0)
    dethrone_windows: int = Field(32, ge=3, le=1024)
    tail_fraction: float = Field(0.1, gt=0, le=1)
    # calibrated on honest runs (docs/scoring.md): above the largest honest gap + 2 SE
    # measured (0.42), and half the bound of the weakest gap-caught attack (2.0)
    gap_penalty_start: float = Field(0.5, ge=0)
    gap_zero: float = Field(1.0, ge=0)
    # the gap is judged at its lower bound gap - gap_z * SE (SE of the held-out bpb), so
    # sampling noise of the held-out plan never becomes penalty
    gap_z: float = Field(2.0, ge=0)
    # a validator's held-out round: every run in it is measured on the same plan
    heldout_round_s: float = Field(86400.0, gt=0)
    step0_max_drop: float = Field(0.05, ge=0, lt=1)
    probe_abs_tol: float = Field(1e-4, gt=0)
    curve_windows: int = Field(10, ge=1, le=1000)
    curve_window_tokens: int = Field(16384, ge=1)
    heldout_positions: int = Field(1536, ge=16)
    heldout_cuts_per_row: int = Field(8, ge=1)
    early_stop: EarlyStopSettings = Field(default_factory=EarlyStopSettings)

    @model_validator(mode="after")
    def _gap_thresholds_ordered(self) -> ScoringSettings:
        if self.gap_zero <= self.gap_penalty_start:
            raise ValueError("scoring.gap_zero must be greater than scoring.gap_penalty_start")
        return self


class VerificationSettings(Section):
    """Contender replay: a run that would take weight is re-run and checked where the
    original run could not know it would be checked (docs/security.md)."""

    enabled: bool = True
    kept_positions: int = Field(20000, ge=1)
    keep_rate_max: float = Field(0.02, gt=0, le=1)
    snapshot_steps: int = Field(4, ge=1, le=64)
    position_abs_tol: float = Field(1e-3, ge=0)
    position_rel_tol: float = Field(1e-4, ge=0)
    max_mismatch_fraction: float = Field(0.002, ge=0, lt=1)
    mean_tol: float = Field(1e-3, gt=0)
    batch_rel_tol: float = Field(1e-3, gt=0)
    max_attempts: int = Field(3, ge=1)


class WeightsSettings(Section):
    dry_run: bool = True
    # The uid the unassigned share goes to: "owner" (the default), the uid of the subnet
    # owner's hotkey as the metagraph says (uid 0 where no owner is known: the local ledger),
    # or a uid.
    burn_uid: int | Literal["owner"] = "owner"
    winner_share: float = Field(0.9, ge=0, le=1)
    research_share: float = Field(0.1, ge=0, le=1)

    @field_validator("burn_uid", mode="before")
    @classmethod
    def _owner_or_uid(cls, value: object) -> int | str:
        text = str(value).strip()
        if text == "owner":
            return text
        if isinstance(value, bool) or not text.isdigit():
            raise ValueError(f"weights.burn_uid must be 'owner' or a uid (an integer >= 0), "
                             f"not {value!r}")
        return int(text)

    @model_validator(mode="after")
    def _shares_fit(self) -> WeightsSettings:
        if self.winner_share + self.research_share > 1 + 1e-12:
            raise ValueError("weights.winner_share + weights.research_share must not exceed 1")
        return self


class AgreementSettings(Section):
    """Shared input between validators (docs/validators.md §9): each serves its signed
    measurements and ranks every run on the stake-weighted median of its own and its
    peers' measurements of the same bundle under the same scoring version."""

    # Fetch peers' measurements and rank on the aggregate; false: own measurements only.
    enabled: bool = True
    # Serve this validator's own measurements, signed, at GET /v1/measurements.
    serve: bool = True
    # A run ranks once measurements from validators holding more than this share of the
    # permitted stake (every permitted validator, reachable or not) are held; a validator
    # reaching no more than this share ranks nothing and offers no weights.
    quorum: float = Field(2 / 3, ge=0, lt=1)
    # Seconds a measurement (and a passed replay) waits after it was made before it counts,
    # so every validator counts it at the same moment; longer than a poll or two.
    settle_s: float = Field(300.0, ge=0)
    # Seconds between two rounds of fetching from every peer.
    poll_s: float = Field(60.0, gt=0)
    # Seconds one request to a peer may take in all (connection, headers and body; a peer
    # that drips its answer is cut there), and each peer's share of a round is three of
    # them; and the most bytes one page may have.
    timeout_s: float = Field(10.0, gt=0)
    max_page_bytes: int = Field(1_000_000, ge=1024, le=16_000_000)
    # Rows per page asked of a peer (and the most this node serves per page).
    page_size: int = Field(200, ge=1, le=1000)
    # A peer whose last good page is older than this leaves the electorate.
    peer_stale_s: float = Field(600.0, gt=0)
    # Seconds a signed page stays acceptable (the signature's freshness window).
    signature_max_age_s: float = Field(60.0, gt=0)
    # Fetch the signed pages each peer holds of others (GET /v1/relay) and its proofs of
    # equivocation (GET /v1/equivocations), so every page one honest validator holds
    # reaches every other; false: this validator's own peers' pages only.
    relay: bool = True
    # Seconds a proven equivocator stays out of the electorate, from the later of its two
    # conflicting signatures (the same moment on every validator).
    equivocation_ban_s: float = Field(7 * 86400.0, ge=0)
    # Fetch, from a peer, the bundle of a run that peers measured and this validator never
    # received (checked against the miner's commitment), so that it ranks and measures it.
    fetch_bundles: bool = True
    # Rows of one validator's measurements (of this scoring version) stored here in all, its
    # own pages and relayed ones together; its new rows past it are not stored (logged,
    # `row_bound`), its rows stored are still updated and its pages read on. The default
    # is agreement/sync.py's MAX_ROWS_PER_PEER: about a year of 270 new runs a day.
    max_rows_per_peer: int = Field(100_000, ge=1)

    @field_validator("max_rows_per_peer", mode="before")
    @classmethod
    def _a_count_not_a_flag(cls, value: object) -> object:
        if isinstance(value, bool):  # pydantic would read true as 1 row
            raise ValueError(f"agreement.max_rows_per_peer must be a positive integer, "
                             f"not {value!r}")
        return value


class RegistrySettings(Section):
    """The research registry; the statistics' constants are in docs/registry.md."""

    decide_prob: float = Field(0.90, gt=0.5, lt=1)
    min_n: int = Field(10, ge=1)
    support_theta: float = Field(0.6, gt=0, lt=1)
    refute_theta: float = Field(0.4, gt=0, lt=1)
    rope_low: float = Field(0.45, gt=0, lt=1)
    rope_high: float = Field(0.55, gt=0, lt=1)
    tie_bpb: float = Field(0.002, ge=0)
    queue_max: int = Field(32, ge=1)
    match_axes: list[str] = Field(default_factory=lambda: ["*"])
    temperature: float = Field(0.25, gt=0)
    credibility_n: int = Field(12, ge=1)
    indecision_half_life: float = Field(20.0, gt=0)
    sprint_trigger: float = Field(0.75, gt=0.5, lt=1)
    sprint_share: float = Field(0.5, ge=0, le=1)
    sprint_max_streak: int = Field(10, ge=0)
    near_miss: float = Field(0.75, gt=0.5, lt=1)
    lean_prob: float = Field(0.6, gt=0.5, lt=1)
    min_importance: float = Field(0.15, ge=0, le=1)
    near_duplicate_ratio: float = Field(0.85, gt=0, le=1)
    stall_window: int = Field(50, ge=1)
    axis_recurrence: int = Field(2, ge=1)
    canary_share: float = Field(0.05, ge=0, lt=1)
    canary_n: int = Field(20, ge=1)
    checkpoint_every: int = Field(100, ge=1)
    credit_window: int = Field(500, ge=1)
    credit_cap: float = Field(25.0, gt=0)
    max_proposals: int = Field(5, ge=1)
    cycle_scored: int = Field(50, ge=0)
    populations: int = Field(3, ge=1, le=8)
    population_epoch_blocks: int = Field(360, ge=1)

    @model_validator(mode="after")
    def _ordered_bounds(self) -> RegistrySettings:
        if not self.refute_theta <= self.rope_low < self.rope_high <= self.support_theta:
            raise ValueError("need refute_theta <= rope_low < rope_high <= support_theta")
        return self


class ValidatorSettings(Section):
    # local: sandboxes on this host's slots; ray: on the slots of a Ray cluster (`ray`).
    executor: Literal["local", "ray"] = "local"
    # None: one slot per group of sandbox.nproc_per_node GPUs on a GPU host, 1 on a CPU host.
    slots: int | None = Field(None, ge=1)
    max_attempts: int = Field(3, ge=1)
    # A run that ends in a host fault goes to another slot at most this many times.
    infra_retries: int = Field(2, ge=0)
    # Health probe of a slot before it takes a run: wall limit, and the share of each GPU's
    # memory that must be free.
    probe_timeout_s: float = Field(120.0, gt=0)
    probe_min_free_fraction: float = Field(0.9, ge=0, le=1)
    # torch.compile a tiny model in the probe's sandbox (once per slot until a probe of it
    # fails): auto = on slots with GPUs; always (CPU slots too); never
    probe_compile: Literal["auto", "always", "never"] = "auto"
    # Seconds before a slot taken out of rotation is probed again.
    slot_reprobe_s: float = Field(600.0, gt=0)
    epoch_s: float = Field(60.0, gt=0)
    poll_s: float = Field(1.0, gt=0)
    work_dir: Path = Path("prism-data/runs")
    update_check: bool = True


class RaySettings(Section):
    """The Ray cluster that runs evaluations when `validator.executor` is `ray`."""

    # The cluster to join: "auto" (a `ray start` on this host) or "HOST:PORT" of the head.
    address: str = "auto"
    # Ray namespace of the slot actors; one validator per namespace.
    namespace: str = "prism"
    # CPUs each slot asks of Ray (GPUs: sandbox.nproc_per_node on nodes that have them).
    cpus_per_slot: int = Field(1, ge=1)
    # Seconds between reads of the cluster's capacity (nodes joining or lost).
    rescan_s: float = Field(30.0, gt=0)


class DashboardSettings(Section):
    """The validator's web dashboard (`GET /`) and Prometheus metrics (`GET /metrics`)."""

    enabled: bool = True
    metrics_enabled: bool = True
    refresh_s: int = Field(15, ge=0)
    queue_rows: int = Field(200, ge=1, le=10_000)
    curve_points: int = Field(400, ge=10, le=10_000)


class Settings(BaseSettings):
    """The whole node configuration. `mode: production` refuses debug-only choices.

    Values come from (highest first) `PRISM_<SECTION>__<KEY>` environment variables, the
    YAML file handed to `load_settings`, then the defaults above.
    """

    model_config = SettingsConfigDict(
        env_prefix="PRISM_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    mode: Literal["local", "production"] = "local"
    storage: StorageSettings = StorageSettings()
    chain: ChainSettings = ChainSettings()
    wallet: WalletSettings = WalletSettings()
    data: DataSettings = DataSettings()
    challenge: ChallengeSettings = ChallengeSettings()
    intake: IntakeSettings = IntakeSettings()
    llm: LlmSettings = LlmSettings()
    gates: GatesSettings = GatesSettings()
    sandbox: SandboxSettings = SandboxSettings()
    scoring: ScoringSettings = ScoringSettings()
    verification: VerificationSettings = VerificationSettings()
    agreement: AgreementSettings = AgreementSettings()
    weights: WeightsSettings = WeightsSettings()
    validator: ValidatorSettings = ValidatorSettings()
    ray: RaySettings = RaySettings()
    registry: RegistrySettings = RegistrySettings()
    dashboard: DashboardSettings = DashboardSettings()

    @model_validator(mode="after")
    def _production_refuses_debug_backends(self) -> Settings:
        if self.mode == "production" and (unsafe := self.unsafe_on_a_network()):
            raise ValueError(
                "refused when mode is 'production' (each is for local debugging only): "
                + "; ".join(unsafe))
        return self

    def unsafe_on_a_network(self) -> list[str]:
        """Every setting that is wrong for a node on a real subnet, each with its fix."""
        chain, found = self.chain, []
        if chain.mode != "online":
            found.append("chain.mode 'local' (a ledger file, not the subnet): set chain.mode: "
                         "online")
        if chain.allow_any_hotkey and "allow_any_hotkey" in chain.model_fields_set:
            found.append("chain.allow_any_hotkey true (any hotkey counts as registered): "
                         "remove it")
        if chain.metagraph_file is not None:
            found.append("chain.metagraph_file (a fixed metagraph instead of the chain's): "
                         "remove it")
        if self.sandbox.backend == "none":
            found.append("sandbox.backend 'none' runs miner code without isolation: use "
                         "docker or bubblewrap")
        return found

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML document arrives as init kwargs; the environment overrides it.
        return (env_settings, init_settings)
