//! One device configuration and the builders of a request queue over it.
//!
//! A run's device is described once, as a [`DeviceConfig`]: the driver (null, io_uring over
//! a file or block device, or a device model), its hardware queues and depths, fault
//! injection, and the [`QueueSettings`] of the request queue above it (scheduler and
//! tunables, `nr_requests`, `nomerges`, limits). fio job options ([`DeviceConfig::from_job`]),
//! `mqblk serve`'s exports and `mqblk replay` map onto it; `mqblk bench` builds it with real
//! threads ([`build`]), and the simulator builds the same queue over the device's model
//! ([`DeviceConfig::model_spec`], [`new_queue`]).

mod build;
mod config;

/// Why a device cannot be described or built: one line naming the option or file.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(transparent)]
    Model(#[from] mqblk_models::ModelError),
    #[error(transparent)]
    Null(#[from] mqblk_drivers::NullError),
    #[error("filename={path}: {source}")]
    Uring {
        path: String,
        source: mqblk_drivers::UringError,
    },
    #[error(transparent)]
    Faults(#[from] mqblk_core::FaultError),
    #[error(transparent)]
    TagSet(#[from] mqblk_core::tag::TagSetError),
    #[error(transparent)]
    Queue(#[from] mqblk_core::queue::QueueError),
    #[error("ioscheduler '{name}': unknown scheduler (available: {available})")]
    UnknownScheduler { name: String, available: String },
    #[error("sched.{name}: {source}")]
    Tunable {
        name: String,
        source: mqblk_core::TunableError,
    },
    #[error("driver '{0}': unknown driver (available: null, uring, sim)")]
    UnknownDriver(String),
    /// Job options that describe no device, or two different ones (the message says which).
    #[error("{0}")]
    Invalid(String),
}

/// For callers whose errors are one-line messages.
impl From<DeviceError> for String {
    fn from(e: DeviceError) -> String {
        e.to_string()
    }
}

pub use build::{apply_tunables, build, build_traced, new_queue, Device};
pub use config::{default_scheduler, DeviceConfig, DriverKind, QueueSettings};

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(text: &str) -> Vec<mqblk_workload::JobSpec> {
        mqblk_workload::parse_job_text("t", text).unwrap()
    }

    /// `elevator_set_default` (`use_default_elevator`): mq-deadline for one hardware queue
    /// or tags shared by all of them, none for several with their own tags or for a driver
    /// that sets `BLK_MQ_F_NO_SCHED_BY_DEFAULT`; a named scheduler always wins.
    #[test]
    fn the_default_scheduler_is_the_kernels() {
        use mqblk_core::{TagSetConfig, TagSetFlags};
        let set = |hw: u16, flags: TagSetFlags| TagSetConfig {
            flags,
            ..TagSetConfig::new(hw, 64)
        };
        let none = TagSetFlags::empty();
        assert_eq!(default_scheduler(&set(1, none)), "mq-deadline");
        assert_eq!(default_scheduler(&set(4, none)), "none");
        assert_eq!(
            default_scheduler(&set(4, TagSetFlags::TAG_HCTX_SHARED)),
            "mq-deadline"
        );
        assert_eq!(
            default_scheduler(&set(1, TagSetFlags::NO_SCHED_BY_DEFAULT)),
            "none"
        );
        let s = QueueSettings::default();
        assert_eq!(s.elevator_type(&set(1, none)).unwrap().name, "mq-deadline");
        let bfq = QueueSettings {
            scheduler: Some("bfq".into()),
            ..QueueSettings::default()
        };
        assert_eq!(bfq.elevator_type(&set(4, none)).unwrap().name, "bfq");
        // The uring driver, as the kernel's loop driver, defaults to none.
        let uring = mqblk_drivers::uring::UringConfig::default().tag_set_config();
        assert_eq!(default_scheduler(&uring), "none");
    }

    #[test]
    fn errors_are_typed_and_name_the_option() {
        let e = DeviceConfig::from_jobs(&jobs("[a]\nnr_hw_queues=2\n[b]\n")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("job 'b': nr_hw_queues differs from job 'a'"),
            "{e}"
        );
        let dev = DeviceConfig::from_jobs(&jobs("[a]\nioscheduler=cfq\n")).unwrap();
        assert!(matches!(
            build(&dev, 1).err(),
            Some(DeviceError::UnknownScheduler { name, .. }) if name == "cfq"
        ));
        let dev =
            DeviceConfig::from_jobs(&jobs("[a]\nioscheduler=deadline\nsched.fifo_batch=-1\n"))
                .unwrap();
        assert!(matches!(
            build(&dev, 1).err(),
            Some(DeviceError::Tunable { name, .. }) if name == "fifo_batch"
        ));
        let dev = DeviceConfig::from_jobs(&jobs("[a]\ndevice=hdd,rpm=1\n")).unwrap();
        assert!(matches!(
            dev.model_spec()
                .and_then(|s| Ok(mqblk_models::build(&s, mqblk_models::SimRng::new(1))?)),
            Err(DeviceError::Model(
                mqblk_models::ModelError::OutOfRange { .. }
            ))
        ));
    }

    #[test]
    fn an_alias_builds_the_scheduler_it_names() {
        let dev = DeviceConfig::from_jobs(&jobs("[a]\nioscheduler=deadline\n")).unwrap();
        let d = build(&dev, 1).unwrap();
        assert_eq!(d.queue.elevator().map(|e| e.name()), Some("mq-deadline"));
        d.queue.teardown();
    }
}
