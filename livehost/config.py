"""Every setting of LiveHost, declared once.

Settings come from environment variables (prefix ``LIVEHOST_``) and from the env file the embedded
stack writes (``<state_dir>/stack.env``). Pointing LiveHost at external infrastructure is three
variables: ``LIVEHOST_KAFKA_BOOTSTRAP``, ``LIVEHOST_POSTGRES_DSN`` and ``LIVEHOST_TRITON_URL``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    """Where the embedded stack keeps data, logs and its env file."""
    return Path(os.environ.get("LIVEHOST_STATE_DIR", REPO_ROOT / ".livehost")).resolve()


def stack_env_file() -> Path:
    return state_dir() / "stack.env"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LIVEHOST_", extra="ignore")

    # The three connections. Defaults are the embedded stack's defaults; `livehost stack up` writes
    # the real values to the env file.
    kafka_bootstrap: str = "127.0.0.1:9092"
    postgres_dsn: str = "postgresql://livehost@127.0.0.1:5432/livehost"
    triton_url: str = "127.0.0.1:8001"

    # Embedded stack: which broker `livehost stack up` starts — "kafka" (Apache Kafka, KRaft, durable;
    # needs Java) or "tansu" (memory-only, for machines without Java) — and its ports (0 = free port).
    stack_broker: str = "kafka"
    stack_kafka_port: int = 0
    stack_kafka_controller_port: int = 0
    # Heap of the embedded Apache Kafka broker, and where its jars are fetched to once (shared by every
    # stack and test session; infra/kafka/pom.xml pins them).
    stack_kafka_heap_mb: int = 512
    # SASL_SSL + SCRAM on the embedded Apache Kafka (certificates from the local CA); off only for
    # debugging the broker itself.
    stack_kafka_security: bool = True
    stack_kafka_dist_dir: Path = REPO_ROOT / ".livehost" / "kafka-dist"
    stack_postgres_port: int = 0
    stack_triton_grpc_port: int = 0
    stack_triton_http_port: int = 0
    stack_triton_metrics_port: int = 0
    # Triton of the embedded stack: the model repository it serves (all models loaded at start), the
    # HTTP endpoint it reports, and how long it may drain at shutdown (DESIGN.md part 2).
    triton_model_repository: Path = REPO_ROOT / "infra" / "triton" / "models"
    triton_http_url: str = "127.0.0.1:8000"
    stack_triton_exit_timeout_s: int = 5

    # gRPC ports of the services (0 = pick a free port and report it).
    ingest_grpc_port: int = 50061
    prompt_grpc_port: int = 50062
    policy_grpc_port: int = 50063
    tools_grpc_port: int = 50064
    voice_grpc_port: int = 50065
    harness_grpc_port: int = 50066
    grpc_host: str = "127.0.0.1"

    # gRPC transport security: mutual TLS on every server and client (README "Security"). The
    # identity of a caller is its client certificate's subject CN; its roles are bound here, and
    # livehost/security/authz.py says which roles each method needs. Credentials live in
    # `grpc_pki_dir` (default <state_dir>/pki, made by `livehost stack up`) as <identity>.pem/.key +
    # ca.pem; `grpc_identity` is the credential this process presents as a client (services present
    # their own name).
    grpc_pki_dir: Path | None = None
    grpc_identity: str = "operator"
    grpc_roles: dict[str, list[str]] = {
        "ingest": ["service"], "prompt": ["service"], "policy": ["service"], "tools": ["service"],
        "voice": ["service"], "harness": ["service"], "hooks": ["service"], "trajectories": ["service"],
        "producer": ["producer"], "operator": ["operator"], "author": ["author"], "reviewer": ["reviewer"],
        "releaser": ["releaser"], "evaluator": ["evaluator"], "breakglass": ["releaser", "break-glass"],
    }
    # Largest request a gRPC server accepts, per method (bytes; checked by gRPC before decoding),
    # and the default for methods not listed. Harness bundles are the only large requests.
    grpc_max_request_bytes: int = 64 * 1024
    grpc_method_max_request_bytes: dict[str, int] = {
        "/livehost.harness.v1.HarnessService/Push": 8 * 1024 * 1024,
        "/livehost.harness.v1.HarnessService/Validate": 8 * 1024 * 1024,
        "/livehost.prompt.v1.PromptAssemblyService/Render": 4 * 1024 * 1024,
        "/livehost.policy.v1.PolicyService/Decide": 4 * 1024 * 1024,
    }

    # What the broker is: "apache" (Apache Kafka, also in compose and Helm) or "tansu". The stack's env
    # file sets it; the Tansu-only client workarounds (short fetch wait, no idempotence, one-record
    # changelog batches, no transactions) follow from "tansu" and from nothing else.
    kafka_flavour: str = "apache"
    # Kafka client tuning. Apache Kafka answers a waiting fetch as soon as data arrives, so the wait
    # only bounds idle polling; Tansu needs 10 ms (its env file says so).
    kafka_fetch_max_wait_ms: int = 100
    # The fetch wait of a consumer whose topic carries no records in the configured mode (the policy and
    # tools services' steps while the prompt step runs the turns, see prompt_runs_turns): an idle fetch
    # is a broker request each wait, and such a reader answers a record as fast at any wait (the broker
    # answers a waiting fetch when data arrives); only a partition handed to it mid-fetch waits longer.
    kafka_idle_fetch_max_wait_ms: int = Field(default=1000, ge=10, le=10_000)
    # Consumer group session (ConsumerLoop, Faust, the voice's room group alike): a member that dies
    # without leaving (SIGKILL, a lost host) is noticed when its session runs out, and only then are its
    # partitions handed over: measured (tests/integration/test_rebalance.py) 6.9 s at 6000 ms, 3.4 s at
    # 3000, 2.9 s at 2500, 2.5 s at 2000 (heartbeat 500). 2500 meets the ~3 s target; the heartbeat, a
    # fifth of it, lets a member miss four in a row. Two members under 12 CPU-burning processes on the
    # 2 cores (load 11) kept their session for 60 s even at 1000/300: CPU contention does not starve
    # heartbeats, only an event loop blocked for seconds would. Brokers refuse sessions below their
    # group.min.session.timeout.ms (Apache Kafka: 6000 unless set): the embedded and compose brokers set
    # 1000; the Helm chart, whose brokers are not its own, sets 6000/1000 (tests/deploy checks all three).
    kafka_session_timeout_ms: int = 2500
    kafka_heartbeat_interval_ms: int = 500
    kafka_client_id: str = "livehost"
    # Kafka security of every client (aiokafka, Faust, the CLI, the simulator). PLAINTEXT | SSL |
    # SASL_PLAINTEXT | SASL_SSL; SASL mechanism SCRAM-SHA-512 (or -256, PLAIN); the CA that signed the
    # brokers' certificates; an optional client certificate for SSL client authentication. The embedded
    # broker runs SASL_SSL + SCRAM and `livehost stack up` writes these to the env file.
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"
    kafka_sasl_username: str = ""
    kafka_sasl_password: SecretStr = SecretStr("")
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    # Idempotent producers (no duplicates from producer retries); Tansu's env file turns them off.
    kafka_enable_idempotence: bool = True
    # Compression of every producer's batches (aiokafka's codecs come from cramjam). A request's state
    # grows to ~28 KB by its last hop, most of it prompt text that repeats from turn to turn, and crosses
    # ~13 hops; lz4 makes it ~5.9 KB. On one machine it saved no measurable CPU, on a network it saves
    # four fifths of the bytes (README "Throughput and overload"). Never used with Tansu (kafka_flavour).
    kafka_compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    # Compression level (KIP-390's compression.level, which aiokafka lacks; livehost.kafka applies it).
    # aiokafka compresses lz4 at level 9, the broker's default, i.e. LZ4 HC: measured 0.45 ms per ~28 KB
    # state against 0.03 ms at level 1, for a record 7% larger. 0 keeps each codec's own default.
    kafka_compression_level: int = Field(default=1, ge=0, le=22)
    kafka_replication_factor: int = 1
    # Kafka transactions for the steps that choose them (each service's settings module says whether
    # its consume-process-produce step is transactional — a ConsumerLoop in a transaction per batch, or
    # Faust's exactly_once guarantee — and why; README "Delivery guarantees" has the measured cost).
    # This switch turns them all off; on Tansu they are always off.
    kafka_transactions: bool = True
    kafka_transaction_timeout_ms: int = 10_000
    # How often an at-least-once consumer (no transaction) commits what it has handled. Every commit is a
    # request the broker writes to __consumer_offsets, and committing after every batch of one or two
    # records was one per record; a crash or a rebalance now redelivers up to this much more, and every
    # such consumer's handler is idempotent. Transactional steps commit with each transaction.
    kafka_commit_interval_ms: int = 250
    kafka_faust_commit_interval_s: float = 0.1
    # How long the stream processors' (Faust) producers let a batch fill before sending it: the hooks
    # processor sends two records per request (the request, its outcome), each its own produce request
    # at 0. 5 ms is the Java client's default since Kafka 4.0 (KIP-1030); it adds at most that per hop.
    kafka_faust_linger_ms: int = Field(default=5, ge=0, le=100)

    # Names this process among the replicas of its service (the supervisor sets it): stable transactional
    # ids, so a restarted replica fences its dead predecessor at once, and stable consumer group
    # instance ids (static membership, KIP-345), so a restarted replica takes its partitions back at
    # once instead of waiting for its predecessor's session to time out.
    replica_id: str = ""
    kafka_static_membership: bool = True

    # Ingest limits (checked before any processing: the byte sizes first, then the characters).
    max_comment_chars: int = 500
    max_comment_bytes: int = 2048
    max_campaign_json_bytes: int = 4096
    # Ingest answers accepted=false for a client_event_id it accepted in this room within this window
    # (durable: a PostgreSQL claim, livehost/claims.py); 0 = for as long as the claim is kept.
    ingest_dedup_window_s: float = 24 * 3600.0

    # Merge window for comments of one room (milliseconds) and the bounded batch size.
    merge_window_ms: int = 800
    merge_max_batch: int = 8
    request_ttl_ms: int = 10_000

    # Harness used when the registry has no active version.
    harness_path: Path = REPO_ROOT / "harness" / "default"

    # Policy model served by Triton.
    policy_model: str = "policy_reference"
    # Models of the Triton repository the policy service may route to (per room or experiment arm).
    policy_models: list[str] = ["policy_reference", "policy_llm"]
    policy_timeout_s: float = 5.0
    policy_retries: int = 2
    # Where a request's turns run (README "Throughput and overload").
    # prompt_runs_turns (the default): the prompt service runs them all in process — prompt, the policy
    # model on Triton, the step hooks, the tools — and publishes only the action that ends the request
    # (a reply, no reply, a fallback) to agent.actions, where the hooks processor applies the step hooks
    # once more, records the outcome and frees the room. A served request crosses 4 Kafka records
    # (comment, request, last action, reply) instead of ~13, and one transaction in the agent's steps
    # instead of one per turn and tool call: measured, twice the capacity with transactions (49.6 vs 25
    # requests/s) and p95 1.36 s at 50/s (4.7 s). What it gives up: a crash mid-request re-runs the
    # request's turns from its agent.requests record (nothing of the first run was published), so a
    # policy that samples may choose other tool arguments the second time (side effects are
    # deduplicated by request, tool and arguments); a product switch is noticed at the last action,
    # not between turns; and the prompt pods need Triton and the tools' database rights. The policy
    # and tools services keep serving gRPC Decide and Execute, and their Kafka steps run again when
    # this is off.
    prompt_runs_turns: bool = True
    # With prompt_runs_turns off: the prompt service still calls the policy model itself (one Kafka hop
    # and one transaction per turn instead of two) and the hooks processor and tools service take the
    # other steps over Kafka. Both off: every step is its own service, as in the design sketch.
    prompt_calls_policy: bool = False

    @property
    def policy_step_on_kafka(self) -> bool:
        """Whether agent.prompts carries records for the policy service (else the prompt step calls the
        model itself)."""
        return not self.prompt_runs_turns and not self.prompt_calls_policy

    @property
    def tools_step_on_kafka(self) -> bool:
        """Whether agent.tool_calls carries records for the tools service (else the prompt step runs
        the tools in process)."""
        return not self.prompt_runs_turns
    # How often the tools service re-reads the live fault drills (livehost/commerce/drills.py): the
    # delay until a started or stopped drill takes effect, without a query per tool call.
    tool_drill_refresh_s: float = 1.0

    # Voice: TTS engine ("piper" natural voice, "espeak" fast fallback, "text" for no audio) and where
    # audio files go (segments carry a file reference, never audio bytes).
    voice_engine: str = "piper"
    voice_audio_dir: Path | None = None

    # Bounded state: per-room state is evicted after this much inactivity — the hooks processor's room
    # table (current link, campaign, agent) and the voice service's rooms.
    room_idle_evict_s: float = 6 * 3600.0
    voice_room_idle_s: float = 600.0
    # Retention (days; 0 = keep forever), enforced by `livehost purge` (a CronJob in the chart).
    retention_audio_days: float = 7.0
    retention_room_memory_days: float = 30.0
    retention_idempotency_days: float = 30.0
    retention_trajectories_days: float = 90.0

    # Services apply the SQL migrations at start-up (the embedded stack, tests). Off where migrations
    # run as their own job (the Helm chart): services then only check the schema is current.
    db_migrate_on_start: bool = True

    # Start-up retry of external dependencies.
    connect_backoff_initial_s: float = 0.2
    connect_backoff_max_s: float = 5.0

    # Metrics (0 = disabled).
    metrics_port: int = 0

    log_level: str = "INFO"
    # The asyncio event loop of every service process: "uvloop" (libuv; its TLS and socket paths are
    # compiled, and every client here speaks TLS to the broker) or "asyncio" (the standard library's).
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    component_start_timeout_s: float = Field(default=60.0)


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, falling back to the embedded stack's env file."""
    env_file = stack_env_file()
    if env_file.exists():
        return Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg, arg-type]
    return Settings(**overrides)  # type: ignore[arg-type]
