//! One of the issues' targets: a figure this run measured against its goal, whether the run
//! met it, and the target as JSON. Every section's report judges its figures with these; a
//! leaf, importing nothing from the rest of the bench, so that no report imports another to
//! make one.

use serde_json::{json, Value};

/// One of the targets, checked against this run's cells.
#[derive(Clone, Debug)]
pub struct Target {
    /// What is measured.
    pub name: &'static str,
    /// The figure this run reached (None when the run did not include the cell).
    pub value: Option<f64>,
    /// The goal, in the same unit.
    pub goal: f64,
    /// Whether a higher value is better.
    pub higher_is_better: bool,
}

impl Target {
    /// Whether the run met the goal (None when not measured).
    pub fn held(&self) -> Option<bool> {
        self.value.map(|value| {
            if self.higher_is_better {
                value >= self.goal
            } else {
                value <= self.goal
            }
        })
    }

    /// The target as a JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "value": self.value,
            "goal": self.goal,
            "higher_is_better": self.higher_is_better,
            "held": self.held(),
        })
    }
}
