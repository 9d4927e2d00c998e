//! The users' role: create, change, delete, list; names are unique; errors name the user.

use std::sync::Arc;

use crate::api::Store;
use crate::error::StoreError;
use crate::users::UserRecord;

fn user(name: &str, grants: &[&str]) -> UserRecord {
    UserRecord {
        name: name.into(),
        credential: format!("SCRAM-SHA-256$4096:c2FsdA==${name}:key"),
        grants: grants.iter().map(|g| g.to_string()).collect(),
    }
}

/// A user is created once, read back as written, listed in name order, and deleted.
pub async fn user_lifecycle(store: Arc<dyn Store>) {
    assert!(
        !store.users().has_users().await.unwrap(),
        "a new store has no users"
    );
    assert_eq!(store.users().user("alice").await.unwrap(), None);
    let alice = user("alice", &["send queue orders-*", "monitor"]);
    store.users().create_user(&user("bob", &[])).await.unwrap();
    store.users().create_user(&alice).await.unwrap();
    assert!(store.users().has_users().await.unwrap());
    assert_eq!(
        store.users().user("alice").await.unwrap(),
        Some(alice.clone())
    );
    let names: Vec<String> = store
        .users()
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.name)
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(
        store.users().create_user(&user("alice", &[])).await,
        Err(StoreError::UserExists("alice".into())),
        "a name is taken once"
    );
    assert_eq!(
        store.users().user("alice").await.unwrap(),
        Some(alice),
        "unchanged"
    );
    store.users().delete_user("alice").await.unwrap();
    assert_eq!(store.users().user("alice").await.unwrap(), None);
    store.users().delete_user("bob").await.unwrap();
    assert!(!store.users().has_users().await.unwrap());
}

/// Credentials and grants are replaced separately; unknown users are `UserNotFound`.
pub async fn user_changes(store: Arc<dyn Store>) {
    store
        .users()
        .create_user(&user("carol", &["monitor"]))
        .await
        .unwrap();
    store
        .users()
        .set_user_credential("carol", "SCRAM-SHA-256$5000:bmV3$x:y")
        .await
        .unwrap();
    let grants = vec!["receive topic prices.*".to_string(), "client shop-*".into()];
    store
        .users()
        .set_user_grants("carol", &grants)
        .await
        .unwrap();
    let carol = store.users().user("carol").await.unwrap().unwrap();
    assert_eq!(carol.credential, "SCRAM-SHA-256$5000:bmV3$x:y");
    assert_eq!(carol.grants, grants, "grants keep their order");
    store.users().set_user_grants("carol", &[]).await.unwrap();
    assert!(store
        .users()
        .user("carol")
        .await
        .unwrap()
        .unwrap()
        .grants
        .is_empty());
    let gone = || Err(StoreError::UserNotFound("dave".into()));
    assert_eq!(store.users().set_user_credential("dave", "x").await, gone());
    assert_eq!(store.users().set_user_grants("dave", &[]).await, gone());
    assert_eq!(store.users().delete_user("dave").await, gone());
}

/// Users and their changes are still there when the store is opened again on the same data
/// (for PostgreSQL: by another node sharing the database). `reopen` opens it.
pub async fn users_survive_reopen(reopen: super::wildcards::Reopen) {
    let store = reopen().await;
    store
        .users()
        .create_user(&user("erin", &["admin"]))
        .await
        .unwrap();
    store
        .users()
        .create_user(&user("frank", &[]))
        .await
        .unwrap();
    store
        .users()
        .set_user_grants("frank", &["monitor".into()])
        .await
        .unwrap();
    store.users().create_user(&user("gone", &[])).await.unwrap();
    store.users().delete_user("gone").await.unwrap();
    drop(store);
    let store = reopen().await;
    let users = store.users().list_users().await.unwrap();
    assert_eq!(
        users,
        [user("erin", &["admin"]), user("frank", &["monitor"])]
    );
}
