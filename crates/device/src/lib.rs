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
mod report;

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

pub use build::{apply_tunables, build, build_traced, new_queue, Device};
pub use config::{default_scheduler, DeviceConfig, DriverConfig, ModelConfig, QueueSettings};
/// The drivers' and models' own settings, as [`DriverConfig`]'s variants hold them.
pub use mqblk_drivers::{NullConfig, UringConfig};
pub use mqblk_models::DeviceSpec;
pub use report::{HctxCounts, QueueReport};

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

    /// Each driver holds its own settings: the job's null_blk options reach the null
    /// driver, its io_uring options the uring driver, and a model named beside a real
    /// driver is what stands for it in the simulator; options of another driver are refused
    /// where they cannot apply.
    #[test]
    fn a_jobs_options_reach_the_driver_that_has_them() {
        let dev = DeviceConfig::from_jobs(&jobs(
            "[a]\nnr_hw_queues=2\nqueue_depth=16\nirqmode=2\ncompletion_nsec=5000\nmemory_backed=1\nsize=8m\n[b]\nsize=16m\nnr_hw_queues=2\nqueue_depth=16\nirqmode=2\ncompletion_nsec=5000\nmemory_backed=1\n",
        ))
        .unwrap();
        let DriverConfig::Null(n) = &dev.driver else {
            panic!("{:?}", dev.driver)
        };
        assert_eq!(
            (n.submit_queues, n.hw_queue_depth, n.completion_nsec),
            (2, 16, 5000)
        );
        assert_eq!(n.irqmode, mqblk_core::IrqMode::Timer);
        assert!(n.memory_backed && dev.stores_data());
        assert_eq!(dev.capacity().unwrap(), 16 << 20, "the larger job's size");
        let spec = dev.model_spec().unwrap();
        assert_eq!(spec.model, "null");
        assert!(spec.params.contains(&("submit_queues".into(), "2".into())));

        let f = std::env::temp_dir().join(format!("mqblk-devcfg-{}", std::process::id()));
        let dev = DeviceConfig::from_jobs(&jobs(&format!(
            "[a]\nioengine=io_uring\nfilename={}\nsize=1m\nsqthread_poll=1\nregisterfiles=1\ndevice=ssd\n",
            f.display()
        )))
        .unwrap();
        let DriverConfig::Uring(u) = &dev.driver else {
            panic!("{:?}", dev.driver)
        };
        assert_eq!(u.path, f);
        assert_eq!(u.size_bytes, Some(1 << 20));
        assert!(u.sqpoll && u.register_files && dev.stores_data());
        assert_eq!(dev.model_spec().unwrap().model, "ssd");

        let dev = DeviceConfig::from_jobs(&jobs("[a]\ndevice=hdd,ncq=8\nfail_nth=5\n")).unwrap();
        let DriverConfig::Model(m) = &dev.driver else {
            panic!("{:?}", dev.driver)
        };
        assert_eq!(m.spec.params, [("ncq".to_string(), "8".to_string())]);
        assert_eq!(dev.driver.faults().fail.every_nth, 5);

        for (text, want) in [
            ("[a]\nfixedbufs=1\n", "fixedbufs: needs ioengine=io_uring"),
            (
                "[a]\nvirtqueue_size=64\n",
                "virtqueue_size= applies to driver=uring",
            ),
            (
                "[a]\ndevice=ssd\nrotational=1\n",
                "rotational= applies to the null",
            ),
            (
                "[a]\ndriver=uring\nfilename=/dev/null\nfail_nth=3\n",
                "fault injection (fail_*, timeout_*, requeue_*) needs driver=null",
            ),
            (
                "[a]\n[b]\nirqmode=1\n",
                "job 'b': irqmode differs from job 'a'",
            ),
        ] {
            let e = DeviceConfig::from_jobs(&jobs(text))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn an_alias_builds_the_scheduler_it_names() {
        let dev = DeviceConfig::from_jobs(&jobs("[a]\nioscheduler=deadline\n")).unwrap();
        let d = build(&dev, 1).unwrap();
        assert_eq!(d.queue.elevator().map(|e| e.name()), Some("mq-deadline"));
        d.queue.teardown();
    }
}
