//! The role matrix: every route × anonymous, viewer, operator, approver, admin, checked
//! against a table of who may call what written out here by hand. The app's own table is read
//! only to prove both list the same routes, so opening a route to more roles in `web/mod.rs`
//! or `api/mod.rs` (or a new route without a row here) fails.

use std::collections::BTreeSet;

use headroom::domain::Role;
use headroom::http::Access;
use headroom::startup::route_table;
use reqwest::StatusCode;

use crate::helpers::{location, TestApp};

/// The least role a route needs, as this test expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Least {
    Public,
    At(Role),
}

/// What a request to a route sends so that, when allowed, it reaches the handler and succeeds.
/// The argument names the caller, so each caller creates differently named things.
#[derive(Clone, Copy)]
enum Body {
    Empty,
    Form(fn(&str) -> Vec<(&'static str, String)>),
    Json(fn(&str) -> serde_json::Value),
}

/// One route of the expected table.
struct Row {
    method: &'static str,
    path: &'static str,
    /// Query string appended for every caller (without `?`).
    query: &'static str,
    least: Least,
    body: Body,
}

const V: Least = Least::At(Role::Viewer);
const O: Least = Least::At(Role::Operator);
const A: Least = Least::At(Role::Admin);
const P: Least = Least::Public;

const SHA: &str = "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10";
const TINY_TEMPLATE: &str = "#cloud-config\nhostname: {{ hostname | yaml }}\n";
/// The seeded config the pin-check routes use: its tarball host is loopback, which the
/// outbound policy refuses before connecting (never `spare-fsn1`, whose host needs DNS).
const PIN_CONFIG: &str = "pin-local";

fn row(method: &'static str, path: &'static str, least: Least, body: Body) -> Row {
    Row {
        method,
        path,
        query: "",
        least,
        body,
    }
}

/// The page form of a valid machine config named `name` on the simulated provider.
fn config_form(name: &str, url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("name", name.to_owned()),
        ("provider", "simulated".into()),
        ("location", "fsn1".into()),
        ("server_type", "cx22".into()),
        ("image", "debian-12".into()),
        ("region", "eu-central".into()),
        ("zone", "fsn1-dc14".into()),
        ("arch", String::new()),
        ("mesh_tags", "tag:spare".into()),
        ("ssh_keys", "4711".into()),
        ("labels", "team=infra".into()),
        ("allocatable.memory_mb", "3584".into()),
        ("allocatable.cpu_millis", "2000".into()),
        ("taints", String::new()),
        ("template", "yubaba-node".into()),
        ("yubaba_channel", "stable".into()),
        ("yubaba_url", url.to_owned()),
        ("yubaba_sha256", SHA.into()),
    ]
}

/// The API body of a valid machine config named `name`.
fn config_json(name: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "provider": "simulated", "location": "fsn1", "server_type": "cx22",
        "region": "eu-central", "zone": "fsn1-dc14", "mesh_tags": ["tag:spare"], "ssh_keys": [4711],
        "labels": {"team": "infra"}, "taints": [], "yubaba_channel": "stable",
        "yubaba_url": "https://releases.example.com/yubaba.tar.gz", "yubaba_sha256": SHA
    })
}

/// The request form's fields for the provision fixtures' fleet (the reason names the caller).
fn provision_form(who: &str) -> Vec<(&'static str, String)> {
    vec![
        ("fleet", PROVISION_FLEET.into()),
        ("machine_config", PIN_CONFIG.into()),
        ("template", PROVISION_TEMPLATE.into()),
        ("count", "1".into()),
        ("reason", format!("by {who}")),
    ]
}

/// A yubaba URL of fleet `name`'s own (an endpoint belongs to one fleet).
fn endpoint_of(name: &str) -> String {
    format!("http://{name}.yubaba.example.com:8080")
}

/// The page form of a valid fleet named `name`, restored with the demo's `spare-fsn1`.
fn fleet_form(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("name", name.to_owned()),
        ("endpoints", endpoint_of(name)),
        ("restore_machine_config", "spare-fsn1".into()),
    ]
}

/// The API body of a valid fleet named `name`.
fn fleet_json(name: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "endpoints": [endpoint_of(name)],
        "restore_machine_config": "spare-fsn1"
    })
}

/// Puts the seeded fleet `spare-fsn1` back after an allowed delete removed it.
async fn restore_fleet(app: &TestApp) {
    let system = headroom::auth::Caller::system();
    if headroom::fleets::get(&app.state.ctx, &system, "spare-fsn1")
        .await
        .is_err()
    {
        let input = headroom::domain::fleet::FleetInput {
            name: "spare-fsn1".into(),
            endpoints: vec![endpoint_of("spare-fsn1")],
            restore_machine_config: "spare-fsn1".into(),
            ..Default::default()
        };
        headroom::fleets::create(&app.state.ctx, &system, &input)
            .await
            .expect("the seeded fleet");
    }
}

/// Every route of the console and the API with the least role that may call it, written
/// out by hand from DESIGN.md's roles: viewers read, operators change configs and templates,
/// admins manage people and tokens.
fn expected_table() -> Vec<Row> {
    use Body::{Empty, Form, Json};
    vec![
        row("GET", "/", V, Empty),
        row("GET", "/login", P, Empty),
        row(
            "POST",
            "/login",
            P,
            Form(|_| {
                vec![
                    ("username", "login-probe".into()),
                    ("password", crate::helpers::PASSWORD.into()),
                ]
            }),
        ),
        row("POST", "/logout", V, Empty),
        row("GET", "/account", V, Empty),
        row(
            "POST",
            "/account/password",
            V,
            Form(|_| {
                vec![
                    ("current_password", crate::helpers::PASSWORD.into()),
                    ("new_password", "a brand new passphrase".into()),
                    ("confirm_password", "a brand new passphrase".into()),
                ]
            }),
        ),
        row("GET", "/users", A, Empty),
        row(
            "POST",
            "/users",
            A,
            Form(|who| {
                vec![
                    ("username", format!("new-{who}")),
                    ("role", "viewer".into()),
                    ("password", "a perfectly fine password".into()),
                ]
            }),
        ),
        row(
            "POST",
            "/users/{username}/role",
            A,
            Form(|_| vec![("role", "operator".into())]),
        ),
        row("POST", "/users/{username}/disable", A, Empty),
        row("POST", "/users/{username}/enable", A, Empty),
        row("GET", "/tokens", A, Empty),
        row(
            "POST",
            "/tokens",
            A,
            Form(|who| {
                vec![
                    ("username", "target".into()),
                    ("label", format!("by {who}")),
                ]
            }),
        ),
        row("POST", "/tokens/{id}/revoke", A, Empty),
        row("GET", "/audit", V, Empty),
        Row {
            query: "format=jsonl",
            ..row("GET", "/audit/export", V, Empty)
        },
        row("GET", "/provisions", V, Empty),
        row("GET", "/provisions/new", O, Empty),
        row("POST", "/provisions/plan", O, Form(provision_form)),
        row("POST", "/provisions", O, Form(provision_form)),
        row("GET", r"/provisions/{id:\d+}", V, Empty),
        row("GET", r"/provisions/{id:\d+}/progress", V, Empty),
        row(
            "POST",
            r"/provisions/{id:\d+}/approve",
            Least::At(Role::Approver),
            Form(|_| vec![("plan_hash", String::new())]),
        ),
        row(
            "POST",
            r"/provisions/{id:\d+}/reject",
            Least::At(Role::Approver),
            Form(|who| vec![("reason", format!("rejected by {who}"))]),
        ),
        row("POST", r"/provisions/{id:\d+}/cancel", O, Empty),
        row(
            "POST",
            r"/provisions/{id:\d+}/machines/{idx:\d+}/destroy",
            Least::At(Role::Approver),
            Empty,
        ),
        row("GET", "/approvals", V, Empty),
        row("GET", "/approvals/badge", V, Empty),
        Row {
            query: "format=csv",
            ..row("GET", "/provisions/export", V, Empty)
        },
        row("GET", "/machine-configs", V, Empty),
        row("GET", "/machine-configs/new", O, Empty),
        row(
            "POST",
            "/machine-configs",
            O,
            Form(|who| config_form(&format!("cfg-{who}"), "https://releases.example.com/y.tgz")),
        ),
        row("GET", "/machine-configs/{name}", V, Empty),
        row("GET", "/machine-configs/{name}/edit", O, Empty),
        row(
            "POST",
            "/machine-configs/{name}",
            O,
            Form(|_| config_form("spare-fsn1", "https://releases.example.com/y.tgz")),
        ),
        row("POST", "/machine-configs/{name}/pin-check", O, Empty),
        row("GET", "/templates", V, Empty),
        row("GET", "/templates/new", O, Empty),
        row(
            "POST",
            "/templates",
            O,
            Form(|who| {
                vec![
                    ("name", format!("tpl-{who}")),
                    ("body", TINY_TEMPLATE.into()),
                ]
            }),
        ),
        row("GET", "/templates/{name}", V, Empty),
        row("GET", "/templates/{name}/edit", O, Empty),
        row(
            "POST",
            "/templates/{name}",
            O,
            Form(|who| {
                vec![
                    ("body", format!("{TINY_TEMPLATE}# saved by {who}\n")),
                    ("config", "spare-fsn1".into()),
                ]
            }),
        ),
        row(
            "POST",
            "/preview",
            O,
            Form(|_| {
                vec![
                    ("body", TINY_TEMPLATE.into()),
                    ("config", "spare-fsn1".into()),
                    ("template", "yubaba-node".into()),
                ]
            }),
        ),
        row("GET", "/catalogue", V, Empty),
        row("GET", "/fleets", V, Empty),
        row("GET", "/fleets/new", O, Empty),
        row(
            "POST",
            "/fleets",
            O,
            Form(|who| fleet_form(&format!("fleet-{who}"))),
        ),
        row("GET", "/fleets/{name}", V, Empty),
        Row {
            query: "range=24h",
            ..row("GET", "/fleets/{name}/chart", V, Empty)
        },
        Row {
            query: "range=24h",
            ..row("GET", "/fleets/{name}/chart/live", V, Empty)
        },
        row("GET", "/fleets/{name}/now", V, Empty),
        row("GET", "/dashboard/cards", V, Empty),
        row("GET", "/fleets/{name}/edit", O, Empty),
        row(
            "POST",
            "/fleets/{name}",
            O,
            Form(|_| fleet_form("spare-fsn1")),
        ),
        row(
            "POST",
            "/fleets/{name}/delete",
            Least::At(Role::Approver),
            Empty,
        ),
        row("POST", "/catalogue/{provider}/refresh", O, Empty),
        row("GET", "/healthz", P, Empty),
        row("GET", "/readyz", P, Empty),
        row("GET", "/metrics", P, Empty),
        row("GET", "/static/{file}", P, Empty),
        // The API.
        row("GET", "/api/v1/me", V, Empty),
        row("GET", "/api/v1/users", A, Empty),
        row(
            "POST",
            "/api/v1/users",
            A,
            Json(|who| {
                serde_json::json!({"username": format!("api-{who}"), "role": "viewer",
                    "password": "a perfectly fine password"})
            }),
        ),
        row("GET", "/api/v1/machine-configs", V, Empty),
        row(
            "POST",
            "/api/v1/machine-configs",
            O,
            Json(|who| config_json(&format!("api-{who}"))),
        ),
        row("GET", "/api/v1/machine-configs/{name}", V, Empty),
        row(
            "PUT",
            "/api/v1/machine-configs/{name}",
            O,
            Json(|_| config_json("spare-fsn1")),
        ),
        row("GET", "/api/v1/machine-configs/{name}/versions", V, Empty),
        row("POST", "/api/v1/machine-configs/{name}/pin-check", O, Empty),
        row("GET", "/api/v1/templates", V, Empty),
        row(
            "POST",
            "/api/v1/templates",
            O,
            Json(|who| serde_json::json!({"name": format!("api-{who}"), "body": TINY_TEMPLATE})),
        ),
        row("GET", "/api/v1/templates/{name}", V, Empty),
        row(
            "PUT",
            "/api/v1/templates/{name}",
            O,
            Json(|who| serde_json::json!({"body": format!("{TINY_TEMPLATE}# put by {who}\n")})),
        ),
        row("GET", "/api/v1/templates/{name}/versions", V, Empty),
        row(
            "POST",
            "/api/v1/render",
            O,
            Json(|_| serde_json::json!({"machine_config": "spare-fsn1"})),
        ),
        row("GET", "/api/openapi.json", P, Empty),
        row(
            "PATCH",
            "/api/v1/users/{username}",
            A,
            Json(|_| serde_json::json!({"role": "operator", "disabled": false})),
        ),
        row("GET", "/api/v1/tokens", A, Empty),
        row(
            "POST",
            "/api/v1/tokens",
            A,
            Json(|who| serde_json::json!({"username": "target", "label": format!("api by {who}")})),
        ),
        row("POST", "/api/v1/tokens/{id}/revoke", A, Empty),
        row("GET", "/api/v1/catalogue", V, Empty),
        row("POST", "/api/v1/catalogue/{provider}/refresh", O, Empty),
        row("GET", "/api/v1/audit", V, Empty),
        row("GET", "/api/v1/provisions", V, Empty),
        row(
            "POST",
            "/api/v1/provisions",
            O,
            Json(|who| {
                serde_json::json!({"fleet": PROVISION_FLEET, "machine_config": PIN_CONFIG,
                    "template": PROVISION_TEMPLATE, "count": 1, "reason": format!("by {who}")})
            }),
        ),
        row("GET", "/api/v1/provisions/{id}", V, Empty),
        row(
            "POST",
            "/api/v1/provisions/{id}/approve",
            Least::At(Role::Approver),
            Empty,
        ),
        row(
            "POST",
            "/api/v1/provisions/{id}/reject",
            Least::At(Role::Approver),
            Json(|who| serde_json::json!({"reason": format!("rejected by {who}")})),
        ),
        row("POST", "/api/v1/provisions/{id}/cancel", O, Empty),
        row(
            "POST",
            "/api/v1/provisions/{id}/machines/{idx}/destroy",
            Least::At(Role::Approver),
            Empty,
        ),
        Row {
            query: "format=csv",
            ..row("GET", "/api/v1/provisions/export", V, Empty)
        },
        row("GET", "/api/v1/fleets", V, Empty),
        row(
            "POST",
            "/api/v1/fleets",
            O,
            Json(|who| fleet_json(&format!("api-{who}"))),
        ),
        row("GET", "/api/v1/fleets/{name}", V, Empty),
        row("GET", "/api/v1/fleets/{name}/headroom", V, Empty),
        row(
            "PUT",
            "/api/v1/fleets/{name}",
            O,
            Json(|_| fleet_json("spare-fsn1")),
        ),
        row(
            "DELETE",
            "/api/v1/fleets/{name}",
            Least::At(Role::Approver),
            Empty,
        ),
        row("GET", "/api/v1/fleets/{name}/history", V, Empty),
        row("GET", "/api/v1/secrets", V, Empty),
    ]
}

/// The seeded fixtures the placeholders name: users (`target` and one per role), a token,
/// the demo's `spare-fsn1` and `yubaba-node`, the simulated provider, and `pin-local`.
struct Fixtures {
    /// Tokens to revoke: one for the page route, one for the API route (a token is revoked once).
    page_token: i64,
    api_token: i64,
    /// Provision requests the provision routes act on.
    provisions: ProvisionFixtures,
}

/// The seeded fleet provision requests are filed for. It needs three approvals: the approver's
/// and the admin's both succeed on the same request and leave it pending, so the runner never
/// starts executing (and writing) while the matrix compares snapshots.
const PROVISION_FLEET: &str = "roles-fleet";
/// A copy of the default template written by `operator-user`, so no approver wrote the versions.
const PROVISION_TEMPLATE: &str = "roles-tpl";

/// Requests filed by `operator-user` for the provision routes.
struct ProvisionFixtures {
    /// Read and approved by everyone allowed (three approvals needed).
    shared: i64,
    /// Rejecting or cancelling works once per request: every call takes a fresh one.
    one_shot: std::cell::RefCell<std::collections::BTreeMap<&'static str, Vec<i64>>>,
    /// Failed requests whose machine 0 has a server at the simulated cloud: a destroy works
    /// once per request, so every call takes a fresh one.
    destroyable: std::cell::RefCell<Vec<i64>>,
}

impl ProvisionFixtures {
    /// The request a provision route's `{id}` names, or `None` for other routes.
    fn id_for(&self, path: &str) -> Option<i64> {
        match path {
            "/api/v1/provisions/{id}"
            | "/api/v1/provisions/{id}/approve"
            | r"/provisions/{id:\d+}"
            | r"/provisions/{id:\d+}/progress" => Some(self.shared),
            "/api/v1/provisions/{id}/reject"
            | "/api/v1/provisions/{id}/cancel"
            | r"/provisions/{id:\d+}/approve"
            | r"/provisions/{id:\d+}/reject"
            | r"/provisions/{id:\d+}/cancel" => Some(
                self.one_shot
                    .borrow_mut()
                    .get_mut(path)
                    .and_then(Vec::pop)
                    .expect("a fresh seeded request"),
            ),
            "/api/v1/provisions/{id}/machines/{idx}/destroy"
            | r"/provisions/{id:\d+}/machines/{idx:\d+}/destroy" => Some(
                self.destroyable
                    .borrow_mut()
                    .pop()
                    .expect("a fresh failed request"),
            ),
            _ => None,
        }
    }
}

/// The fleet, template and requests behind [`ProvisionFixtures`].
async fn seed_provisions(app: &TestApp, op: &crate::helpers::Session) -> ProvisionFixtures {
    let res = app
        .post_form(
            "/templates",
            op,
            &[
                ("name", PROVISION_TEMPLATE),
                ("body", headroom::cloud_init::DEFAULT_TEMPLATE_BODY),
            ],
        )
        .await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    let system = headroom::auth::Caller::system();
    let fleet = headroom::domain::fleet::FleetInput {
        name: PROVISION_FLEET.into(),
        endpoints: vec![endpoint_of(PROVISION_FLEET)],
        restore_machine_config: PIN_CONFIG.into(),
        approvals_required: Some(serde_json::json!(3)),
        ..Default::default()
    };
    headroom::fleets::create(&app.state.ctx, &system, &fleet)
        .await
        .expect("the provision fleet");
    let requester = headroom::auth::Caller {
        actor: headroom::domain::Actor::User("operator-user".into()),
        role: Role::Operator,
        user_id: None,
    };
    let request = headroom::provisioning::NewRequest {
        fleet: PROVISION_FLEET.into(),
        machine_config: PIN_CONFIG.into(),
        template: Some(PROVISION_TEMPLATE.into()),
        count: 1,
        reason: "role matrix".into(),
    };
    let file = || async {
        headroom::provisioning::requests::create(&app.state.ctx, &requester, &request)
            .await
            .expect("a seeded request")
            .id
    };
    let shared = file().await;
    let mut one_shot = std::collections::BTreeMap::new();
    for path in [
        "/api/v1/provisions/{id}/reject",
        "/api/v1/provisions/{id}/cancel",
        // The page's approve takes fresh requests too: the API row already approved `shared`
        // as the same users, and a second approval by one person is refused.
        r"/provisions/{id:\d+}/approve",
        r"/provisions/{id:\d+}/reject",
        r"/provisions/{id:\d+}/cancel",
    ] {
        // One per call of `concrete`: the matrix asks once per row and once per caller.
        let mut ids = Vec::new();
        for _ in 0..6 {
            ids.push(file().await);
        }
        one_shot.insert(path, ids);
    }
    // Five callers in the session matrix and four roles in the bearer test for the API route;
    // six more for the page route (once per row and once per caller).
    let mut filed = Vec::new();
    for _ in 0..16 {
        filed.push(file().await);
    }
    // At once: the simulated cloud takes a second to answer a create.
    let creating: Vec<_> = filed
        .into_iter()
        .map(|id| tokio::spawn(simulated_server_for(app.state.ctx.clone(), id)))
        .collect();
    let mut destroyable = Vec::new();
    for task in creating {
        let (id, server_id) = task.await.unwrap();
        destroyable.push(failed_with_a_server(app, id, server_id).await);
    }
    ProvisionFixtures {
        shared,
        one_shot: std::cell::RefCell::new(one_shot),
        destroyable: std::cell::RefCell::new(destroyable),
    }
}

/// A server at the simulated cloud carrying request `id`'s provision label: `(id, server id)`.
async fn simulated_server_for(ctx: headroom::context::Ctx, id: i64) -> (i64, i64) {
    let sim = ctx
        .providers
        .get(headroom::domain::machine::ProviderKind::Simulated)
        .expect("the simulated cloud")
        .clone();
    let spec = headroom::provider::ServerSpec {
        name: format!("roles-destroy-{id}"),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        location: "fsn1".into(),
        user_data: String::from("#cloud-config\n").into(),
        labels: [(
            headroom::provider::PROVISION_LABEL.to_owned(),
            id.to_string(),
        )]
        .into(),
        ssh_keys: vec![],
    };
    let server = sim.create_server(&spec).await.expect("a simulated server");
    (id, server.server.id)
}

/// Makes request `id` look as the runner leaves a failed execution: machine 0 `failed` with
/// server `server_id`, the request `failed`.
async fn failed_with_a_server(app: &TestApp, id: i64, server_id: i64) -> i64 {
    sqlx::query(
        "UPDATE provision_machines SET status = 'failed', server_id = $1, error = 'seeded'
         WHERE provision_id = $2 AND idx = 0",
    )
    .bind(server_id)
    .bind(id)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("UPDATE provisions SET state = 'failed' WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    id
}

async fn seed(app: &TestApp) -> Fixtures {
    app.create_user("target", Role::Viewer).await;
    app.create_user("login-probe", Role::Viewer).await;
    for role in Role::ALL {
        app.create_user(&format!("{role}-user"), role).await;
    }
    app.token_for("target").await;
    app.token_for("target").await;
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM api_tokens ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    let op = app.quick_session("operator-user").await;
    let form = config_form(PIN_CONFIG, "https://127.0.0.1:1/x");
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let res = app.post_form("/machine-configs", &op, &fields).await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    restore_fleet(app).await;
    let provisions = seed_provisions(app, &op).await;
    Fixtures {
        page_token: ids[0],
        api_token: ids[1],
        provisions,
    }
}

/// A concrete path for a route of the expected table, naming seeded things.
fn concrete(r: &Row, f: &Fixtures) -> String {
    let name = if r.path.ends_with("/pin-check") {
        PIN_CONFIG
    } else if r.path.contains("/templates/") {
        "yubaba-node"
    } else {
        "spare-fsn1"
    };
    let id = if r.path.starts_with("/api/") {
        f.api_token
    } else {
        f.page_token
    };
    let id = f.provisions.id_for(r.path).unwrap_or(id).to_string();
    let path = headroom::web::paths::fill(
        r.path,
        &[
            ("name", name),
            ("username", "target"),
            ("id", &id),
            ("idx", "0"),
            ("provider", "simulated"),
            ("file", "app.css"),
        ],
    );
    assert!(
        !path.contains('{'),
        "{} has an unfilled placeholder",
        r.path
    );
    if r.query.is_empty() {
        path
    } else {
        format!("{path}?{}", r.query)
    }
}

/// The app's table and this one list the same (method, path) pairs, and each route is
/// declared with the least role expected here.
#[test]
fn the_expected_table_lists_every_route_of_the_app_with_its_declared_role() {
    let app: BTreeSet<(String, String)> = route_table()
        .iter()
        .map(|e| (e.method.to_string(), e.path.to_owned()))
        .collect();
    let mine: BTreeSet<(String, String)> = expected_table()
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(
        mine.len(),
        expected_table().len(),
        "a route appears twice in the expected table"
    );
    let unlisted: Vec<_> = app.difference(&mine).collect();
    let gone: Vec<_> = mine.difference(&app).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "routes without a row in roles.rs (add one with its least role): {unlisted:?}; \
         rows for routes the app no longer has: {gone:?}"
    );
    for e in route_table() {
        let r = expected_table()
            .into_iter()
            .find(|r| r.method == e.method.as_str() && r.path == e.path)
            .unwrap();
        let declared = match e.access {
            Access::Public => Least::Public,
            Access::AtLeast(role) => Least::At(role),
        };
        assert_eq!(
            declared, r.least,
            "{} {}: the app declares {declared:?}, roles.rs expects {:?}",
            e.method, e.path, r.least
        );
    }
}

/// Whether a caller (None: anonymous) may call a route of least role `least`.
fn may(least: Least, who: Option<Role>) -> bool {
    match (least, who) {
        (Least::Public, _) => true,
        (Least::At(_), None) => false,
        (Least::At(need), Some(have)) => have.includes(need),
    }
}

#[tokio::test]
async fn every_route_allows_exactly_the_roles_the_table_declares() {
    let app = TestApp::spawn_with_config().await;
    let fixtures = seed(&app).await;
    let table = expected_table();
    let mut checked = 0;
    for r in &table {
        let path = concrete(r, &fixtures);
        let is_api = path.starts_with("/api/");
        let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
        for who in [
            None,
            Some(Role::Viewer),
            Some(Role::Operator),
            Some(Role::Approver),
            Some(Role::Admin),
        ] {
            // Again per caller: a one-shot provision route names a fresh request each time.
            let path = concrete(r, &fixtures);
            let allowed = may(r.least, who);
            let label = who.map_or("anon".to_owned(), |w| w.to_string());
            let what = format!("{} {path} as {label}", r.method);
            let mut req = app.client.request(method.clone(), app.url(&path));
            // A fresh session each time: some allowed requests (logout, disable) end it.
            let csrf = if let Some(role) = who {
                let s = app.quick_session(&format!("{role}-user")).await;
                req = req.header("Cookie", &s.cookie);
                s.csrf
            } else {
                let (cookie, token) = app.login_form().await;
                req = req.header("Cookie", cookie);
                token
            };
            req = req.header("X-CSRF-Token", &csrf);
            req = match r.body {
                Body::Empty => req,
                Body::Form(f) => {
                    let mut fields = f(&label);
                    fields.push(("csrf_token", csrf.clone()));
                    req.form(&fields)
                }
                Body::Json(f) => req.json(&f(&label)),
            };
            let before = app.snapshot().await;
            let res = req.send().await.unwrap();
            let status = res.status();
            // The guard sends people to sign in with ?next=; logout's own redirect to /login
            // is success.
            let to_login =
                status == StatusCode::SEE_OTHER && location(&res).starts_with("/login?next=");
            if allowed {
                // Allowed means handled and succeeded: a 404 or 422 would mean the request
                // never reached what the route is for.
                assert!(
                    (status.is_success() || status.is_redirection()) && !to_login,
                    "{what}: expected 2xx/3xx, got {status}: {}",
                    res.text().await.unwrap_or_default()
                );
            } else {
                if who.is_none() && is_api {
                    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
                } else if who.is_none() {
                    assert!(
                        to_login,
                        "{what}: expected a redirect to sign in, got {status}"
                    );
                } else {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
                }
                assert_eq!(
                    app.snapshot().await,
                    before,
                    "{what} was refused yet changed something"
                );
            }
            checked += 1;
            // Undo what an allowed request may have done to the fixtures.
            sqlx::query("UPDATE users SET disabled = FALSE")
                .execute(&app.pool)
                .await
                .unwrap();
            restore_fleet(&app).await;
        }
    }
    assert_eq!(checked, table.len() * 5);
}

#[tokio::test]
async fn bearer_tokens_carry_their_users_role() {
    let app = TestApp::spawn_with_config().await;
    let fixtures = seed(&app).await;
    for role in Role::ALL {
        let token = app.token_for(&format!("{role}-user")).await;
        for r in expected_table()
            .iter()
            .filter(|r| r.path.starts_with("/api/"))
        {
            let path = concrete(r, &fixtures);
            let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
            let mut req = app
                .client
                .request(method, app.url(&path))
                .bearer_auth(&token);
            let label = format!("{role}-bearer");
            req = match r.body {
                Body::Empty => req,
                Body::Form(f) => req.form(&f(&label)),
                Body::Json(f) => req.json(&f(&label)),
            };
            let res = req.send().await.unwrap();
            let status = res.status();
            let what = format!("{} {path} with a {role} token", r.method);
            if may(r.least, Some(role)) {
                assert!(
                    status.is_success() || status.is_redirection(),
                    "{what}: expected 2xx/3xx, got {status}: {}",
                    res.text().await.unwrap_or_default()
                );
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
            }
            restore_fleet(&app).await;
        }
    }
}

#[tokio::test]
async fn navigation_shows_only_what_the_role_may_use() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    let admin = app.session_for(Role::Admin).await;
    let nav = |html: String| crate::helpers::texts(&html, ".topbar nav a");
    let v = nav(app.get("/", &viewer).await.text().await.unwrap());
    let a = nav(app.get("/", &admin).await.text().await.unwrap());
    assert!(
        !v.contains(&"Users".to_owned()) && !v.contains(&"API tokens".to_owned()),
        "{v:?}"
    );
    assert!(
        a.contains(&"Users".to_owned()) && a.contains(&"API tokens".to_owned()),
        "{a:?}"
    );
}

#[tokio::test]
async fn domain_operations_check_the_role_even_without_the_route_guard() {
    // The page is not the only gate: calling the operation directly as an operator fails.
    let app = TestApp::spawn().await;
    app.create_user("op", Role::Operator).await;
    let mut conn = app.pool.acquire().await.unwrap();
    let op = headroom::db::users::by_name(&mut conn, "op")
        .await
        .unwrap()
        .unwrap();
    drop(conn);
    let caller = headroom::auth::Caller {
        actor: headroom::audit::Actor::User("op".into()),
        role: op.role,
        user_id: Some(op.id),
    };
    let input = headroom::auth::users::NewUserInput {
        username: "sneaky".into(),
        role: "admin".into(),
        password: "a perfectly fine password".into(),
    };
    let err = headroom::auth::users::create_user(&app.state.ctx, &caller, &input)
        .await
        .unwrap_err();
    assert!(
        matches!(err, headroom::error::OpError::Forbidden(_)),
        "{err:?}"
    );
    assert!(
        headroom::auth::users::set_role(&app.state.ctx, &caller, "op", "admin")
            .await
            .is_err()
    );
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test]
async fn the_pin_check_api_is_for_operators_and_up() {
    let app = TestApp::spawn_with_config().await;
    // `pin-local` has a loopback URL: the outbound policy refuses it, so no check leaves
    // the machine. Seeded through the page, as an operator would.
    seed(&app).await;
    let route = route_table()
        .into_iter()
        .find(|r| r.path == headroom::api::paths::MACHINE_CONFIG_PIN_CHECK)
        .expect("pin-check is in the route table");
    assert_eq!(route.access, Access::AtLeast(Role::Operator));
    let url = app.url(&format!("/api/v1/machine-configs/{PIN_CONFIG}/pin-check"));
    // Anonymous, with a valid pre-login CSRF pair so that only the missing sign-in decides.
    let (cookie, token) = app.login_form().await;
    let anonymous = app
        .client
        .post(&url)
        .header("Cookie", cookie)
        .header("X-CSRF-Token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    for role in Role::ALL {
        let token = app.token_for(&format!("{role}-user")).await;
        let checks_before = app.count("pin_checks").await;
        let res = app
            .client
            .post(&url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        if role.includes(Role::Operator) {
            assert_eq!(res.status(), StatusCode::OK, "{role}");
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(v["message"], "refused: loopback address", "{role}: {v}");
        } else {
            assert_eq!(res.status(), StatusCode::FORBIDDEN, "{role}");
            assert_eq!(app.count("pin_checks").await, checks_before, "{role}");
        }
    }
}

/// An operator cannot approve, by API token or page, even another's request.
#[tokio::test]
async fn an_operator_cannot_approve_anothers_request_by_token_or_page() {
    let app = TestApp::spawn_with_config().await;
    let id = app.file_request().await;
    let op = app.session_for(Role::Operator).await;
    let token = app.token_for("operator-user").await;
    let (status, _) = app
        .post_json(
            &format!("/api/v1/provisions/{id}/approve"),
            &token,
            &serde_json::json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let res = app
        .post_form(
            &format!("/provisions/{id}/approve"),
            &op,
            &[("plan_hash", "")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let mut conn = app.pool.acquire().await.unwrap();
    let p = headroom::provisioning::requests::load(&mut conn, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.state.as_str(), "pending_approval");
}
