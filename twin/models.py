"""The app's model registry.  Django loads ``twin.models``; each domain package owns its
models (all under the one app label ``twin``, so the migrations did not move)."""

from twin.alerts.models import Alert, AlertRule, Silence  # noqa: F401
from twin.audit.models import AuditEntry  # noqa: F401
from twin.inventory.grid_models import SiteMirror  # noqa: F401
from twin.inventory.models import (  # noqa: F401
    Accelerator,
    AcceleratorModel,
    AcceleratorStatus,
    CloudPool,
    Cluster,
    CoolingLoop,
    DataHall,
    Grid,
    GridCloudRegion,
    Link,
    LinkStatus,
    Node,
    NodeStatus,
    PowerFeed,
    Rack,
    Site,
    StorageStatus,
    StorageSystem,
    Switch,
    SwitchTier,
    WanLink,
)
from twin.live.models import (  # noqa: F401
    Drill,
    DrillStatus,
    EngineCommand,
    EngineEvent,
    EngineHealth,
    EngineSnapshot,
    EntityChunk,
    EntitySample,
    GridState,
    GridStateSource,
    GridWhatIf,
    GridWhatIfStatus,
    HistorySample,
    LiveState,
)
from twin.studies.models import Study, StudyRun, WhatIf  # noqa: F401
