//! The request form and the decision forms as submitted: raw text that becomes the operations'
//! input exactly once.

use serde::Deserialize;

use crate::domain::provision::PlanHash;
use crate::domain::FieldError;
use crate::provisioning::NewRequest;

/// Longest text read as a count; anything longer is out of range without parsing.
const COUNT_MAX_CHARS: usize = 8;

/// The request form's fields.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct RequestForm {
    pub fleet: String,
    /// Empty: the fleet's restore machine config.
    pub machine_config: String,
    /// Empty: the machine config's own template.
    pub template: String,
    pub count: String,
    pub reason: String,
}

impl RequestForm {
    /// A fresh form: one machine of the first fleet's restore config.
    pub fn blank(fleet: &str) -> Self {
        RequestForm {
            fleet: fleet.to_owned(),
            count: "1".into(),
            ..RequestForm::default()
        }
    }

    /// The request with an empty machine config replaced by `restore_config`, the fleet's
    /// restore config (the form offers it as the default choice). A count that is not a
    /// whole number becomes 0, so the operation names the count's rule together with every
    /// other field's (one place decides the range, for the page and the API).
    pub fn to_request(&self, restore_config: Option<&str>) -> NewRequest {
        let raw = self.count.trim();
        let count = if raw.chars().count() > COUNT_MAX_CHARS {
            0
        } else {
            raw.parse::<i64>().unwrap_or(0)
        };
        let machine_config = match self.machine_config.trim() {
            "" => restore_config.unwrap_or_default().to_owned(),
            chosen => chosen.to_owned(),
        };
        let template = self.template.trim();
        NewRequest {
            fleet: self.fleet.trim().to_owned(),
            machine_config,
            template: (!template.is_empty()).then(|| template.to_owned()),
            count,
            reason: self.reason.clone(),
        }
    }
}

/// The approve forms: the plan hash the approver was shown, an optional comment, and
/// `confirm=yes` on the confirmation step (the only submit that approves).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ApproveForm {
    pub plan_hash: String,
    pub comment: String,
    pub confirm: String,
}

impl ApproveForm {
    /// Whether this is the confirmation step's submit.
    pub fn confirmed(&self) -> bool {
        self.confirm == "yes"
    }

    /// The plan hash the approver was shown, parsed by the rule the API uses; empty means
    /// "approve the current plan", as an empty API body does.
    pub fn seen_plan_hash(&self) -> Result<Option<PlanHash>, FieldError> {
        let raw = self.plan_hash.trim();
        (!raw.is_empty())
            .then(|| PlanHash::parse("plan_hash", raw))
            .transpose()
    }
}

/// The reject form: a reason is required (the operation says so by field).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RejectForm {
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(count: &str, config: &str) -> RequestForm {
        RequestForm {
            fleet: "demo".into(),
            machine_config: config.into(),
            count: count.into(),
            reason: "spares".into(),
            ..RequestForm::default()
        }
    }

    #[test]
    fn an_empty_machine_config_means_the_fleets_restore_config() {
        let req = form("2", "").to_request(Some("spare-fsn1"));
        assert_eq!(req.machine_config, "spare-fsn1");
        assert_eq!(req.count, 2);
        assert_eq!(req.template, None);
        let req = form("2", "other").to_request(Some("spare-fsn1"));
        assert_eq!(req.machine_config, "other");
    }

    #[test]
    fn the_seen_plan_hash_is_parsed_by_the_plan_hash_rule() {
        let form = |h: &str| ApproveForm {
            plan_hash: h.to_owned(),
            ..ApproveForm::default()
        };
        assert_eq!(form("  ").seen_plan_hash(), Ok(None));
        let hash = "ab".repeat(32);
        assert_eq!(
            form(&hash).seen_plan_hash().unwrap().unwrap().as_str(),
            hash
        );
        for bad in ["not-a-hash", &"AB".repeat(32), &"a".repeat(65)] {
            let e = form(bad).seen_plan_hash().unwrap_err();
            assert_eq!(e, PlanHash::parse("plan_hash", bad).unwrap_err(), "{bad}");
        }
    }

    #[test]
    fn a_count_that_is_not_a_whole_number_becomes_zero_for_the_operation_to_refuse() {
        for bad in ["", "two", "1.5", "99999999999999999999"] {
            assert_eq!(form(bad, "").to_request(None).count, 0, "{bad:?}");
        }
        assert_eq!(form(" 21 ", "").to_request(None).count, 21);
    }
}
