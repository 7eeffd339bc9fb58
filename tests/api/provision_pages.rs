//! The provision pages: the request form and its live plan, the detail page's actions by role,
//! the four-eyes rule in the page, the polled progress partial and the approvals badge.

use headroom::domain::Role;
use reqwest::StatusCode;
use scraper::{Html, Selector};

use crate::helpers::{location, texts, Session, TestApp};

/// A console with the demo's config and fleet (`demo`, restored with `spare-fsn1`, one
/// approval).
pub(crate) async fn app() -> TestApp {
    let app = TestApp::spawn_with_config().await;
    headroom::sim::demo::seed_fleet(&app.state)
        .await
        .expect("seed fleet");
    app
}

pub(crate) fn select<'a>(doc: &'a Html, css: &str) -> Vec<scraper::ElementRef<'a>> {
    doc.select(&Selector::parse(css).unwrap()).collect()
}

/// Files a request for `count` machines through the form; answers its id.
pub(crate) async fn file(app: &TestApp, s: &Session, count: &str) -> i64 {
    let res = app
        .post_form(
            "/provisions",
            s,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", count),
                ("reason", "the fleet is short of spares"),
            ],
        )
        .await;
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "{}",
        res.text().await.unwrap()
    );
    let to = location(&res);
    to.strip_prefix("/provisions/")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("redirected to {to}"))
}

async fn state_of(app: &TestApp, id: i64) -> String {
    sqlx::query_scalar("SELECT state FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Each field's message on a re-rendered form, checking that its control points at it.
fn field_messages(html: &str) -> Vec<(String, String)> {
    let doc = Html::parse_document(html);
    let mut out = Vec::new();
    for control in select(&doc, "#request-form [aria-invalid=true]") {
        let name = control.value().attr("name").unwrap().to_owned();
        let described = control.value().attr("aria-describedby").unwrap_or("");
        let err_id = format!("f-{name}-error");
        assert!(
            described.split(' ').any(|d| d == err_id),
            "{name}'s control is not described by its message: {described:?}"
        );
        let msg = texts(html, &format!("#{err_id}")).join("");
        assert!(!msg.is_empty(), "{name} has no message");
        out.push((name, msg));
    }
    out
}

/// What a case is called, the fields sent, and (field, part of its message) expected.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>);

#[tokio::test]
async fn the_form_comes_back_with_a_message_by_field_for_wrong_empty_huge_and_hostile_values() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let huge = "x".repeat(5000);
    let hostile = "<script>alert(1)</script>\u{7}";
    let cases: Vec<Case> = vec![
        (
            "empty",
            vec![
                ("fleet", ""),
                ("machine_config", ""),
                ("template", ""),
                ("count", ""),
                ("reason", ""),
            ],
            vec![
                ("fleet", "required"),
                ("count", "between 1 and 20"),
                ("reason", "is required"),
            ],
        ),
        (
            "wrong",
            vec![
                ("fleet", "nope"),
                ("machine_config", "spare-fsn1"),
                ("template", "no-such"),
                ("count", "2"),
                ("reason", "spares"),
            ],
            vec![
                ("fleet", "no fleet is named nope"),
                ("template", "no template is named no-such"),
            ],
        ),
        (
            "too many",
            vec![
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "21"),
                ("reason", "spares"),
            ],
            vec![("count", "must be between 1 and 20")],
        ),
        (
            "huge",
            vec![
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "99999999999999999999"),
                ("reason", &huge),
            ],
            vec![
                ("count", "between 1 and 20"),
                ("reason", "at most 500 characters"),
            ],
        ),
        (
            "hostile",
            vec![
                ("fleet", "\"><img src=x>"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "1"),
                ("reason", hostile),
            ],
            vec![("fleet", ""), ("reason", "")],
        ),
    ];
    for (what, fields, expected) in cases {
        let res = app.post_form("/provisions", &op, &fields).await;
        assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "{what}");
        let html = res.text().await.unwrap();
        let got = field_messages(&html);
        for (field, needle) in expected {
            let msg = got
                .iter()
                .find(|(f, _)| f == field)
                .unwrap_or_else(|| panic!("{what}: no message for {field}: {got:?}"));
            assert!(msg.1.contains(needle), "{what}: {field}: {:?}", msg.1);
        }
        // What was typed comes back as text, never as markup.
        let doc = Html::parse_document(&html);
        assert!(
            select(&doc, "main img, main script").is_empty(),
            "{what}: markup was echoed"
        );
        let reason = texts(&html, "#f-reason").join("");
        let sent = fields.iter().find(|(k, _)| *k == "reason").unwrap().1;
        assert_eq!(
            reason,
            sent.trim(),
            "{what}: the reason is kept for correction"
        );
    }
    assert_eq!(app.count("provisions").await, 0, "nothing was filed");
}

#[tokio::test]
async fn a_fresh_form_shows_no_error_and_a_submit_without_a_reason_names_it_for_a_screen_reader() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let html = app
        .get("/provisions/new?fleet=demo", &op)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    assert!(
        select(
            &doc,
            "main [aria-invalid], main .field-error, main .error-summary"
        )
        .is_empty(),
        "a fresh form accuses nobody: {html}"
    );
    // The server names the rules after a submit, so the browser's own bubbles do not stop it;
    // the plan is asked for on load and when a field is left, never per keystroke.
    assert_eq!(select(&doc, "form#request-form[novalidate]").len(), 1);
    assert_eq!(
        select(&doc, "#plan-inputs[hx-trigger='load, change']").len(),
        1
    );
    assert_eq!(select(&doc, "#f-reason[required]").len(), 1);

    let res = app
        .post_form(
            "/provisions",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "1"),
                ("reason", ""),
            ],
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    // `field_messages` checks each invalid control is described by its own message.
    assert_eq!(
        field_messages(&html),
        [(
            "reason".to_owned(),
            "is required: say why these machines are needed".to_owned()
        )]
    );
    let summary = texts(&html, ".error-summary").join(" ");
    assert!(
        summary.contains("reason"),
        "the summary names it: {summary}"
    );
    assert_eq!(app.count("provisions").await, 0);
}

#[tokio::test]
async fn the_live_plan_shows_each_machine_and_the_cost_and_a_blocked_plan_cannot_be_filed() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let res = app
        .htmx_post(
            "/provisions/plan",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "3"),
                ("reason", ""),
            ],
        )
        .await;
    // Nothing written yet: the preview shows the machines and the cost, names no error, and
    // leaves filing open (filing is what says the reason is required).
    assert_eq!(res.status(), StatusCode::OK);
    let html = res.text().await.unwrap();
    assert!(texts(&html, ".plan-problems li").is_empty(), "{html}");
    assert_eq!(texts(&html, "#plan-machines tbody tr").len(), 3, "{html}");
    assert_eq!(texts(&html, "#monthly-cost").len(), 1, "{html}");
    let doc = Html::parse_fragment(&html);
    assert!(select(&doc, "#file-request[disabled]").is_empty(), "{html}");
    // A reason typed is held to its rules in the preview too.
    let res = app
        .htmx_post(
            "/provisions/plan",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "3"),
                ("reason", &"x".repeat(501)),
            ],
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let said = texts(&res.text().await.unwrap(), ".plan-problems li").join(" | ");
    assert!(said.starts_with("reason: must be at most 500"), "{said}");

    let res = app
        .htmx_post(
            "/provisions/plan",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", ""),
                ("count", "3"),
                ("reason", "spares"),
            ],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let html = res.text().await.unwrap();
    let doc = Html::parse_fragment(&html);
    let rows = select(&doc, "#plan-machines tbody tr");
    assert_eq!(rows.len(), 3, "one row per machine");
    let names = texts(&html, "#plan-machines tbody tr td:first-child");
    assert_eq!(
        names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "unique names {names:?}"
    );
    for sha in texts(&html, "#plan-machines code.hash") {
        assert_eq!(sha.len(), 64, "{sha}");
    }
    // The cost is count × the catalogue's price for cx22 in fsn1, as the API reports it.
    let draft = headroom::provisioning::requests::plan(
        &app.state.ctx,
        &headroom::domain::Caller::system(),
        &headroom::provisioning::NewRequest {
            fleet: "demo".into(),
            machine_config: "spare-fsn1".into(),
            template: None,
            count: 3,
            reason: "spares".into(),
        },
    )
    .await
    .unwrap();
    let hourly: f64 = draft.plan.hourly_price.parse().unwrap();
    let shown = texts(&html, "#hourly-cost").join("");
    let shown_value: f64 = shown.split(' ').next().unwrap().parse().unwrap();
    assert!(
        (shown_value - 3.0 * hourly).abs() < 1e-9,
        "{shown} vs 3 × {hourly}"
    );
    assert!(shown.contains(&draft.plan.currency), "{shown}");
    // The provider's decimal text, trailing zeros past the cents dropped.
    assert_eq!(
        texts(&html, "#monthly-cost").join(""),
        format!(
            "{}/month",
            headroom::web::components::money(&draft.plan.monthly_cost, &draft.plan.currency)
        )
    );
    assert!(
        select(&doc, "#file-request:not([disabled])").len() == 1,
        "a clean plan may be filed"
    );

    // A template with an error finding blocks filing, and says why.
    let res = app
        .post_form(
            "/templates",
            &op,
            &[("name", "typo"), ("body", "#cloud-config\nruncmds: []\n")],
        )
        .await;
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "{}",
        res.text().await.unwrap()
    );
    let res = app
        .htmx_post(
            "/provisions/plan",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", "typo"),
                ("count", "1"),
                ("reason", "spares"),
            ],
        )
        .await;
    let html = res.text().await.unwrap();
    let doc = Html::parse_fragment(&html);
    assert!(select(&doc, "#file-request[disabled]").len() == 1, "{html}");
    assert!(texts(&html, "#blocked-why")
        .join("")
        .contains("cannot be filed"));
    assert!(
        texts(&html, ".finding.error").join(" ").contains("runcmd"),
        "{html}"
    );
    // And the server refuses it too, naming the finding at the template field.
    let res = app
        .post_form(
            "/provisions",
            &op,
            &[
                ("fleet", "demo"),
                ("machine_config", ""),
                ("template", "typo"),
                ("count", "1"),
                ("reason", "spares"),
            ],
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let got = field_messages(&res.text().await.unwrap());
    assert!(
        got.iter()
            .any(|(f, m)| f == "template" && m.contains("runcmd")),
        "{got:?}"
    );
    assert_eq!(app.count("provisions").await, 0);
}

#[tokio::test]
async fn the_requester_sees_the_four_eyes_rule_instead_of_approve_and_their_post_is_refused() {
    let app = app().await;
    // An approver may file requests too; they still may not approve their own.
    let alice = app.session_for(Role::Approver).await;
    let id = file(&app, &alice, "1").await;
    let html = app
        .get(&format!("/provisions/{id}"), &alice)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    assert!(
        select(&doc, "#approve, #approve-form").is_empty(),
        "no approve button for the requester"
    );
    assert!(
        texts(&html, "#four-eyes").join("").contains("Four-eyes"),
        "the rule is shown"
    );
    let hash = texts(&html, "#plan-hash").join("");
    let res = app
        .post_form(
            &format!("/provisions/{id}/approve"),
            &alice,
            &[("plan_hash", &hash)],
        )
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let body = res.text().await.unwrap();
    assert!(
        texts(&body, ".error-text").join("").contains("four-eyes"),
        "{body}"
    );
    assert_eq!(state_of(&app, id).await, "pending_approval");
    assert_eq!(app.count("provision_approvals").await, 0);
}

#[tokio::test]
async fn viewers_and_operators_see_no_approve_button_and_cannot_approve() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    app.create_user("vera", Role::Viewer).await;
    app.create_user("otto", Role::Operator).await;
    for who in ["vera", "otto"] {
        let s = app.quick_session(who).await;
        let html = app
            .get(&format!("/provisions/{id}"), &s)
            .await
            .text()
            .await
            .unwrap();
        let doc = Html::parse_document(&html);
        assert!(
            select(&doc, "#approve, #reject").is_empty(),
            "{who} sees no decision buttons"
        );
        let hash = texts(&html, "#plan-hash").join("");
        assert_eq!(hash.len(), 64);
        let res = app
            .post_form(
                &format!("/provisions/{id}/approve"),
                &s,
                &[("plan_hash", &hash)],
            )
            .await;
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{who}");
    }
    assert_eq!(state_of(&app, id).await, "pending_approval");
    // An approver who did not file it sees the button, bound to the plan shown.
    let bob = app.session_for(Role::Approver).await;
    let html = app
        .get(&format!("/provisions/{id}"), &bob)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    let hidden = select(&doc, "#approve-form input[name=plan_hash]");
    assert_eq!(hidden.len(), 1);
    assert_eq!(
        hidden[0].value().attr("value").unwrap(),
        texts(&html, "#plan-hash").join("")
    );
}

#[tokio::test]
async fn the_progress_partial_polls_until_the_request_is_finished_and_then_carries_no_trigger() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    let partial = |html: String| {
        let doc = Html::parse_fragment(&html);
        let el = select(&doc, "#progress")[0].value().clone();
        (
            el.attr("hx-trigger").map(str::to_owned),
            el.attr("hx-get").map(str::to_owned),
        )
    };
    let html = app
        .get(&format!("/provisions/{id}/progress"), &op)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        partial(html),
        (
            Some("every 2s".into()),
            Some(format!("/provisions/{id}/progress"))
        ),
        "a pending request polls"
    );
    let res = app
        .post_form(&format!("/provisions/{id}/cancel"), &op, &[])
        .await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(state_of(&app, id).await, "cancelled");
    let html = app
        .get(&format!("/provisions/{id}/progress"), &op)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        partial(html),
        (None, None),
        "a finished request stops the polling"
    );
    // The detail page embeds the same stopped partial.
    let html = app
        .get(&format!("/provisions/{id}"), &op)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    assert!(select(&doc, "[hx-trigger*=every][hx-get*=progress]").is_empty());
    assert_eq!(texts(&html, "#progress .badge.state"), vec!["cancelled"]);
}

#[tokio::test]
async fn a_rejection_needs_a_reason_named_at_its_box() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    let bob = app.session_for(Role::Approver).await;
    let res = app
        .post_form(
            &format!("/provisions/{id}/reject"),
            &bob,
            &[("reason", "  ")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    assert!(
        texts(&html, "#f-reason-error")
            .join("")
            .contains("is required"),
        "{html}"
    );
    assert_eq!(state_of(&app, id).await, "pending_approval");
    let res = app
        .post_form(
            &format!("/provisions/{id}/reject"),
            &bob,
            &[("reason", "not this week")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(state_of(&app, id).await, "rejected");
    let html = app
        .get(&format!("/provisions/{id}"), &bob)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        texts(&html, "#state-reason")
            .join("")
            .contains("not this week"),
        "{html}"
    );
}

#[tokio::test]
async fn the_badge_and_the_inbox_count_down_after_an_approval() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let bob = app.session_for(Role::Approver).await;
    let badge = |html: String| texts(&html, ".visually-hidden").join("");
    let html = app
        .get("/approvals/badge", &bob)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(badge(html), "0 requests awaiting approval");
    let first = file(&app, &op, "1").await;
    let second = file(&app, &op, "2").await;
    let html = app
        .get("/approvals/badge", &bob)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(texts(&html, ".nav-count"), vec!["2"]);
    assert_eq!(badge(html), "2 requests awaiting approval");
    let inbox = app.get("/approvals", &bob).await.text().await.unwrap();
    // Neither fleet is in deficit: the one that expires soonest comes first.
    assert_eq!(
        texts(&inbox, "#inbox tbody tr td:first-child a"),
        vec![format!("#{first}"), format!("#{second}")]
    );

    let page = app
        .get(&format!("/provisions/{first}"), &bob)
        .await
        .text()
        .await
        .unwrap();
    let hash = crate::helpers::input_value(&page, "plan_hash").unwrap();
    let res = app
        .post_form(
            &format!("/provisions/{first}/approve"),
            &bob,
            &[("plan_hash", &hash), ("confirm", "yes")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), format!("/provisions/{first}"));
    let html = app
        .get("/approvals/badge", &bob)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(badge(html), "1 request awaiting approval");
    let inbox = app.get("/approvals", &bob).await.text().await.unwrap();
    assert_eq!(
        texts(&inbox, "#inbox tbody tr td:first-child a"),
        vec![format!("#{second}")]
    );

    // Others are told why their inbox is empty, and load no badge.
    let html = app.get("/approvals", &op).await.text().await.unwrap();
    assert!(texts(&html, "#inbox-explanation")
        .join("")
        .contains("approver role"));
    let doc = Html::parse_document(&html);
    assert!(select(&doc, "#approvals-badge").is_empty());
    let html = app.get("/", &bob).await.text().await.unwrap();
    let doc = Html::parse_document(&html);
    let slot = select(&doc, "#approvals-badge");
    assert_eq!(slot[0].value().attr("hx-get"), Some("/approvals/badge"));
    assert_eq!(slot[0].value().attr("hx-trigger"), Some("load, every 15s"));
}

#[tokio::test]
async fn an_approval_of_a_plan_other_than_the_one_shown_is_refused() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    let bob = app.session_for(Role::Approver).await;
    let res = app
        .post_form(
            &format!("/provisions/{id}/approve"),
            &bob,
            &[("plan_hash", &"0".repeat(64))],
        )
        .await;
    assert_eq!(
        res.status(),
        StatusCode::CONFLICT,
        "{}",
        res.text().await.unwrap()
    );
    assert_eq!(state_of(&app, id).await, "pending_approval");
}

#[tokio::test]
async fn an_approval_whose_plan_hash_is_not_hex_is_refused_by_the_apis_rule() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    let bob = app.session_for(Role::Approver).await;
    for bad in ["not-a-hash", &"A".repeat(64), &"a".repeat(65)] {
        let res = app
            .post_form(
                &format!("/provisions/{id}/approve"),
                &bob,
                &[("plan_hash", bad)],
            )
            .await;
        assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        let html = res.text().await.unwrap();
        assert_eq!(
            texts(&html, "#approve-form #plan_hash-error"),
            [format!("plan_hash {}", crate::provisions::PLAN_HASH_RULE)],
            "{bad}"
        );
    }
    assert_eq!(state_of(&app, id).await, "pending_approval");
}

/// Makes request `id` look as the runner leaves a failed execution: machine 0 `failed` with a
/// server at the simulated cloud carrying the request's label.
async fn fail_with_a_server(app: &TestApp, id: i64) -> i64 {
    let sim = app
        .state
        .ctx
        .providers
        .get(headroom::domain::machine::ProviderKind::Simulated)
        .expect("the simulated cloud")
        .clone();
    let spec = headroom::provider::ServerSpec {
        name: format!("pages-destroy-{id}"),
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
    sqlx::query(
        "UPDATE provision_machines SET status = 'failed', server_id = $1, error = 'boot timed out'
         WHERE provision_id = $2 AND idx = 0",
    )
    .bind(server.server.id)
    .bind(id)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("UPDATE provisions SET state = 'failed' WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    server.server.id
}

#[tokio::test]
async fn an_approver_destroys_a_failed_machine_from_the_page_and_others_see_no_button() {
    let app = app().await;
    let op = app.session_for(Role::Operator).await;
    let id = file(&app, &op, "1").await;
    let server_id = fail_with_a_server(&app, id).await;
    let button = format!("form[action='/provisions/{id}/machines/0/destroy'] button[hx-confirm]");

    let html = app
        .get(&format!("/provisions/{id}"), &op)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    assert!(
        select(&doc, &button).is_empty(),
        "an operator may not destroy"
    );
    assert_eq!(
        texts(&html, "#machines .error-text"),
        vec!["boot timed out"]
    );
    // The redacted payload is reachable by keyboard and named by its summary.
    let pre = select(&doc, "pre#payload-0");
    assert_eq!(pre[0].value().attr("tabindex"), Some("0"));
    assert_eq!(
        pre[0].value().attr("aria-labelledby"),
        Some("payload-0-name")
    );
    assert_eq!(
        texts(&html, "#payload-heading"),
        vec!["Payload (each «secret:NAME» is where that secret's value goes)"]
    );

    let bob = app.session_for(Role::Approver).await;
    let html = app
        .get(&format!("/provisions/{id}"), &bob)
        .await
        .text()
        .await
        .unwrap();
    let doc = Html::parse_document(&html);
    let found = select(&doc, &button);
    assert_eq!(found.len(), 1, "the approver gets the destroy button");
    let confirm = found[0].value().attr("hx-confirm").unwrap();
    assert!(
        confirm.contains(&format!("server {server_id}")),
        "{confirm}"
    );

    let res = app
        .htmx_post(&format!("/provisions/{id}/machines/0/destroy"), &bob, &[])
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let html = res.text().await.unwrap();
    // The progress fragment comes back: the machine destroyed, its button gone.
    assert_eq!(texts(&html, "#machines .machine-status"), vec!["destroyed"]);
    let doc = Html::parse_fragment(&html);
    assert!(select(&doc, &button).is_empty());
    assert!(app
        .audit_actions()
        .await
        .contains(&"provision.machine_destroyed".to_owned()));
}
