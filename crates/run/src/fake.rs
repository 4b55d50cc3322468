//! The fake-data functions templates name, as Artillery's built-in fake-data plugin answers
//! them: `{{ $internetEmail() }}`, `{{ $personFirstName() }}` and the older `$rand…` names
//! (`$randEmail()`, `$randFullName()`…). Their values are drawn at run time
//! (`loadlab-script`).
//!
//! The plugin calls the Faker library, whose functions are named by module and function
//! (`internetEmail`). The common ones render values of the same shape here, from small word
//! lists of our own; any other function of a Faker module renders a random word, since a load
//! test needs a value that varies, rarely a realistic one. Written by hand: no Rust crate
//! speaks Faker's names, and a realistic generator's locale data would dwarf the binary for a
//! few fields.

use serde::{Deserialize, Serialize};

/// A fake-data function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fake {
    /// `internetEmail`, `randEmail`.
    Email,
    /// `personFullName`, `randFullName`.
    FullName,
    /// `personFirstName`, `randFirstName`.
    FirstName,
    /// `personLastName`, `randLastName`.
    LastName,
    /// `internetUsername`, `randUserName`.
    UserName,
    /// `internetPassword`, `randPassword`: 15 letters and digits.
    Password,
    /// `stringUuid`, `randUuid`: a version 4 UUID.
    Uuid,
    /// `phoneNumber`, `randPhoneNumber`.
    Phone,
    /// `locationCity`, `randCity`.
    City,
    /// `locationCountry`, `randCountry`.
    Country,
    /// `locationStreetAddress`, `randStreetAddress`.
    StreetAddress,
    /// `locationZipCode`, `randZipCode`.
    ZipCode,
    /// `companyName`, `randCompanyName`.
    CompanyName,
    /// `numberInt`, `randNumber`: 0 to 2^53 − 1, Faker's default range.
    Number,
    /// `datatypeBoolean`, `randBoolean`.
    Boolean,
    /// `internetUrl`, `randUrl`.
    Url,
    /// `internetIpv4`, `randIp`.
    Ip,
    /// `loremWord`, `randWord`, and any other function of a Faker module.
    Word,
    /// `loremSentence`, `randSentence`.
    Sentence,
    /// `loremParagraph`, `randParagraph`.
    Paragraph,
    /// `loremText`, `randText`.
    Text,
    /// `personJobTitle`, `randJobTitle`.
    JobTitle,
    /// `colorHuman`, `randColor`.
    Color,
    /// `commerceProductName`, `randProductName`.
    ProductName,
}

/// Each function by its Faker name and by the plugin's older alias.
const NAMES: [(&str, &str, Fake); 24] = [
    ("internetEmail", "randEmail", Fake::Email),
    ("personFullName", "randFullName", Fake::FullName),
    ("personFirstName", "randFirstName", Fake::FirstName),
    ("personLastName", "randLastName", Fake::LastName),
    ("internetUsername", "randUserName", Fake::UserName),
    ("internetPassword", "randPassword", Fake::Password),
    ("stringUuid", "randUuid", Fake::Uuid),
    ("phoneNumber", "randPhoneNumber", Fake::Phone),
    ("locationCity", "randCity", Fake::City),
    ("locationCountry", "randCountry", Fake::Country),
    (
        "locationStreetAddress",
        "randStreetAddress",
        Fake::StreetAddress,
    ),
    ("locationZipCode", "randZipCode", Fake::ZipCode),
    ("companyName", "randCompanyName", Fake::CompanyName),
    ("numberInt", "randNumber", Fake::Number),
    ("datatypeBoolean", "randBoolean", Fake::Boolean),
    ("internetUrl", "randUrl", Fake::Url),
    ("internetIpv4", "randIp", Fake::Ip),
    ("loremWord", "randWord", Fake::Word),
    ("loremSentence", "randSentence", Fake::Sentence),
    ("loremParagraph", "randParagraph", Fake::Paragraph),
    ("loremText", "randText", Fake::Text),
    ("personJobTitle", "randJobTitle", Fake::JobTitle),
    ("colorHuman", "randColor", Fake::Color),
    ("commerceProductName", "randProductName", Fake::ProductName),
];

/// Faker's modules: a function `<module><Name>` of one of them is a fake-data function.
const MODULES: [&str; 26] = [
    "airline", "animal", "book", "color", "commerce", "company", "database", "datatype", "date",
    "finance", "food", "git", "hacker", "image", "internet", "location", "lorem", "music",
    "number", "person", "phone", "science", "string", "system", "vehicle", "word",
];

impl Fake {
    /// The function a template names (`internetEmail`, `randEmail`, or another function of a
    /// Faker module), or `None` when it is none of them.
    pub fn named(name: &str) -> Option<Fake> {
        if let Some((_, _, f)) = NAMES.iter().find(|(a, b, _)| *a == name || *b == name) {
            return Some(*f);
        }
        let faker = MODULES.iter().any(|m| {
            name.strip_prefix(m)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|c| c.is_ascii_uppercase())
        });
        faker.then_some(Fake::Word)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_names_of_a_function_and_any_faker_function_are_known() {
        assert_eq!(Fake::named("randEmail"), Some(Fake::Email));
        assert_eq!(Fake::named("internetEmail"), Some(Fake::Email));
        assert_eq!(Fake::named("airlineAirport"), Some(Fake::Word));
        assert_eq!(Fake::named("internet"), None);
        assert_eq!(Fake::named("randomNumber"), None);
        assert_eq!(Fake::named("personlowercase"), None);
    }
}
