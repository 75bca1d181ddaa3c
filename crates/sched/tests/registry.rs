//! The run-time registry: a scheduler registered by name is found, a taken name is refused,
//! and one unregistered (`elv_unregister`) can be registered again; the built-in ones stay.

use mqblk_sched::{lookup, register, unregister, ElevatorType, REGISTRY};

/// mq-deadline's type under another name (its hooks serve any name).
fn renamed(name: &'static str) -> &'static ElevatorType {
    let dd = REGISTRY.iter().find(|e| e.name == "mq-deadline").unwrap();
    Box::leak(Box::new(ElevatorType {
        name,
        alias: None,
        aliases: &[],
        ..**dd
    }))
}

#[test]
fn a_scheduler_unregistered_can_be_registered_again() {
    register(renamed("registry-test")).unwrap();
    assert!(lookup("registry-test").is_some());
    let e = register(renamed("registry-test")).unwrap_err();
    assert!(e.contains("already registered"), "{e}");
    unregister("registry-test").unwrap();
    assert!(lookup("registry-test").is_none());
    let e = unregister("registry-test").unwrap_err();
    assert!(e.contains("not registered"), "{e}");
    register(renamed("registry-test")).unwrap();
    assert!(lookup("registry-test").is_some());
    let e = unregister("bfq").unwrap_err();
    assert!(e.contains("built in"), "{e}");
    assert!(lookup("bfq").is_some());
}
