//! Who a caller is and what it may do. A caller is known by the certificate it presented in
//! the TLS handshake, which the server's verifier chained to the cluster's CA: its subject's
//! common name is its name, and its organizational unit its role. Clients may write, read,
//! `weak_tail` and `length`; sequencers and operators may also fence, seal, trim, create,
//! delete and list. A server started without TLS trusts its network and lets every caller do
//! everything (the benchmark's "TLS off" cell).

use std::fmt;

use tonic::Status;

/// What a caller may do, from its certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Appends and reads: write, read, weak_tail, length.
    Client,
    /// An AtomicLog's sequencer: a client that may also fence, seal and trim the drives of
    /// its loglet, and create and delete them.
    Sequencer,
    /// A person or tool running the cluster: everything.
    Operator,
}

impl Role {
    /// The role a certificate's organizational unit names.
    pub fn parse(unit: &str) -> Option<Role> {
        match unit {
            "client" => Some(Role::Client),
            "sequencer" => Some(Role::Sequencer),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }

    /// The name a certificate carries for this role.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Sequencer => "sequencer",
            Role::Operator => "operator",
        }
    }

    /// Whether a caller of this role may do `op`.
    pub fn may(self, op: Op) -> bool {
        match op {
            Op::Write | Op::Read | Op::WeakTail | Op::Length | Op::Limits | Op::Sequence => true,
            Op::Seal | Op::Fence | Op::Trim | Op::Create | Op::Delete | Op::List => {
                matches!(self, Role::Sequencer | Role::Operator)
            }
        }
    }
}

/// The service's operations, as the permission table names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// LogDrive::write.
    Write,
    /// LogDrive::read.
    Read,
    /// LogDrive::weak_tail.
    WeakTail,
    /// LogDrive::seal.
    Seal,
    /// LogDrive::fence.
    Fence,
    /// LogDrive::trim.
    Trim,
    /// LogDrive::length.
    Length,
    /// The store's create.
    Create,
    /// The store's delete.
    Delete,
    /// The store's list of drives.
    List,
    /// The server's limits.
    Limits,
    /// A sequencer's calls: slots, and installing a segment when the active one's sequencer
    /// is gone (a client's appends depend on both).
    Sequence,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Op::Write => "write",
            Op::Read => "read",
            Op::WeakTail => "weak_tail",
            Op::Seal => "seal",
            Op::Fence => "fence",
            Op::Trim => "trim",
            Op::Length => "length",
            Op::Create => "create",
            Op::Delete => "delete",
            Op::List => "list",
            Op::Limits => "limits",
            Op::Sequence => "sequence",
        };
        f.write_str(name)
    }
}

/// A caller the handshake verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The certificate's common name.
    pub name: String,
    /// The role its organizational unit names; `None` when it names no role this server
    /// knows (such a caller may do nothing).
    pub role: Option<Role>,
}

impl Identity {
    /// The identity in a DER certificate the verifier already chained to the CA; `None`
    /// when the certificate cannot be parsed (a verified chain always can).
    pub fn from_certificate(der: &[u8]) -> Option<Identity> {
        let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = certificate.subject();
        let name = subject
            .iter_common_name()
            .find_map(|attribute| attribute.as_str().ok())
            .unwrap_or("")
            .to_string();
        let role = subject
            .iter_organizational_unit()
            .find_map(|attribute| attribute.as_str().ok().and_then(Role::parse));
        Some(Identity { name, role })
    }
}

/// What the server knows of a connection's caller.
#[derive(Clone, Debug)]
pub enum Caller {
    /// The server runs without TLS: every caller is trusted.
    Trusted,
    /// A TLS connection whose client presented no certificate.
    Anonymous,
    /// A TLS connection whose client presented a certificate of the cluster's CA.
    Verified(Identity),
}

impl Caller {
    /// Whether this caller may do `op`: `UNAUTHENTICATED` without a certificate,
    /// `PERMISSION_DENIED` for a role that may not. The status says who and what, for the
    /// caller's log as for the server's.
    pub fn authorize(&self, op: Op) -> Result<(), Status> {
        match self {
            Caller::Trusted => Ok(()),
            Caller::Anonymous => Err(Status::unauthenticated(format!(
                "{op} refused: the connection presented no client certificate"
            ))),
            Caller::Verified(identity) => match identity.role {
                Some(role) if role.may(op) => Ok(()),
                Some(role) => Err(Status::permission_denied(format!(
                    "{op} refused: {} has the role {}, which may not {op}",
                    identity.name,
                    role.name()
                ))),
                None => Err(Status::permission_denied(format!(
                    "{op} refused: {}'s certificate names no role",
                    identity.name
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sequencers_and_operators_change_a_drives_state_beyond_its_values() {
        let all = [
            Op::Write,
            Op::Read,
            Op::WeakTail,
            Op::Seal,
            Op::Fence,
            Op::Trim,
            Op::Length,
            Op::Create,
            Op::Delete,
            Op::List,
            Op::Limits,
            Op::Sequence,
        ];
        let client_may: Vec<Op> = all.into_iter().filter(|op| Role::Client.may(*op)).collect();
        assert_eq!(
            client_may,
            [
                Op::Write,
                Op::Read,
                Op::WeakTail,
                Op::Length,
                Op::Limits,
                Op::Sequence
            ]
        );
        assert!(all.iter().all(|op| Role::Sequencer.may(*op)));
        assert!(all.iter().all(|op| Role::Operator.may(*op)));
    }

    #[test]
    fn callers_without_a_certificate_or_a_role_are_refused_with_typed_statuses() {
        let anonymous = Caller::Anonymous.authorize(Op::Read).unwrap_err();
        assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);
        let roleless = Caller::Verified(Identity {
            name: "x".into(),
            role: None,
        });
        let refused = roleless.authorize(Op::Read).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        let client = Caller::Verified(Identity {
            name: "app".into(),
            role: Some(Role::Client),
        });
        let fence = client.authorize(Op::Fence).unwrap_err();
        assert_eq!(fence.code(), tonic::Code::PermissionDenied);
        assert!(fence.message().contains("app"), "{}", fence.message());
        assert!(Caller::Trusted.authorize(Op::Delete).is_ok());
    }
}
