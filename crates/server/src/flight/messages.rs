//! The Flight session messages (`arrow.flight.protocol`, `Flight.proto`) that
//! `arrow-flight` 59 does not generate. Their action bodies and results travel raw (not
//! `Any`-packed): that is how the clients send and read them.

use std::collections::HashMap;

/// `SessionOptionValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionOptionValue {
    /// The value, when set (an empty value clears the option).
    #[prost(oneof = "session_option_value::OptionValue", tags = "1, 2, 3, 4, 5")]
    pub option_value: Option<session_option_value::OptionValue>,
}

/// Nested types of [`SessionOptionValue`].
pub mod session_option_value {
    /// `SessionOptionValue.StringListValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StringListValue {
        /// The strings.
        #[prost(string, repeated, tag = "1")]
        pub values: Vec<String>,
    }

    /// `SessionOptionValue.option_value`.
    // The variants are named after the proto's fields (`string_value`, …).
    #[allow(clippy::enum_variant_names)]
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum OptionValue {
        /// A string.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// A boolean.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// A 64-bit integer.
        #[prost(sfixed64, tag = "3")]
        Int64Value(i64),
        /// A double.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        /// A list of strings.
        #[prost(message, tag = "5")]
        StringListValue(StringListValue),
    }
}

/// `SetSessionOptionsRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsRequest {
    /// Options by name.
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `SetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsResult {
    /// The options that were not set, by name.
    #[prost(map = "string, message", tag = "1")]
    pub errors: HashMap<String, SetSessionOptionsError>,
}

/// `SetSessionOptionsResult.Error`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsError {
    /// Why (`SetSessionOptionsResult.ErrorValue`).
    #[prost(int32, tag = "1")]
    pub value: i32,
}

/// `SetSessionOptionsResult.ErrorValue.INVALID_NAME`.
pub const INVALID_NAME: i32 = 1;
/// `SetSessionOptionsResult.ErrorValue.INVALID_VALUE`.
pub const INVALID_VALUE: i32 = 2;

/// `GetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSessionOptionsResult {
    /// Options by name.
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `CloseSessionResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionResult {
    /// `CloseSessionResult.Status`.
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `CloseSessionResult.Status.CLOSED`.
pub const CLOSED: i32 = 1;

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn wire_format_matches_flight_proto() {
        // `SetSessionOptionsRequest{session_options: {"catalog": {string_value: "c"}}}` as
        // pyarrow's generated code serialises it.
        let bytes = [
            0x0a, 0x0e, 0x0a, 0x07, b'c', b'a', b't', b'a', b'l', b'o', b'g', 0x12, 0x03, 0x0a,
            0x01, b'c',
        ];
        let req = SetSessionOptionsRequest::decode(&bytes[..]).expect("decode");
        assert_eq!(
            req.session_options["catalog"].option_value,
            Some(session_option_value::OptionValue::StringValue("c".into()))
        );
        assert_eq!(
            CloseSessionResult { status: CLOSED }.encode_to_vec(),
            vec![0x08, 0x01]
        );
    }
}
