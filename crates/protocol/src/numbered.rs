//! [`numbered_enum!`]: an enum of wire numbers, its variants listed once.
//!
//! The error codes and the frame kinds are both fieldless enums whose variants stand for
//! numbers on the wire; each needs every variant in a list, the number of a variant, the variant
//! of a number and the variant's name. The macro writes those from the one declaration, so a new
//! variant cannot be left out of any of them.

/// Declares a fieldless `#[repr(u16)]` enum whose variants are given their wire numbers, with:
/// - `ALL`: every variant, in the order declared;
/// - `as_u16`: a variant's number;
/// - `from_u16`: the variant of a number, if any;
/// - `name`: the variant's name, as written in the declaration (`QueueNotFound`).
macro_rules! numbered_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$variant_meta:meta])*
                $variant:ident = $number:literal,
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        $vis enum $name {
            $(
                $(#[$variant_meta])*
                $variant = $number,
            )+
        }

        impl $name {
            /// Every variant, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire number.
            pub fn as_u16(self) -> u16 {
                self as u16
            }

            /// The variant for a wire number, if it is one.
            pub fn from_u16(n: u16) -> Option<$name> {
                match n {
                    $($number => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The stable name, as used in docs and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)+
                }
            }
        }
    };
}

pub(crate) use numbered_enum;
