//! The wire parser against arbitrary bytes: it returns values or errors, never panics, and
//! what it accepts re-encodes to the same bytes. 2,000 cases per property in the test suite;
//! a longer run: `PROPTEST_CASES=1000000 cargo test --release -p mqblk-nbd --test proto_fuzz`.

use mqblk_nbd::proto;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn request_headers(b in proptest::array::uniform28(any::<u8>())) {
        if let Ok(r) = proto::parse_request(&b) {
            prop_assert_eq!(proto::encode_request(&r), b);
        }
    }

    #[test]
    fn extended_request_headers(b in proptest::array::uniform32(any::<u8>())) {
        if let Ok(r) = proto::parse_ext_request(&b) {
            prop_assert_eq!(proto::encode_ext_request(&r), b);
        }
    }

    #[test]
    fn option_headers(b in proptest::array::uniform16(any::<u8>())) {
        if let Ok((_, len)) = proto::option_header(&b) {
            prop_assert!(len <= proto::MAX_OPTION_LEN);
        }
    }

    #[test]
    fn option_payloads(data in proptest::collection::vec(any::<u8>(), 0..300), flags in any::<u32>()) {
        let _ = proto::parse_info_request(&data);
        let _ = proto::parse_meta_request(&data);
        let _ = proto::client_flags(flags);
    }

    #[test]
    fn well_formed_go_requests_parse_back(name in "[a-z0-9/._-]{0,40}", infos in proptest::collection::vec(any::<u16>(), 0..8)) {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in &infos {
            d.extend_from_slice(&i.to_be_bytes());
        }
        let (n, i) = proto::parse_info_request(&d).unwrap();
        prop_assert_eq!(n, name);
        prop_assert_eq!(i, infos);
    }
}
