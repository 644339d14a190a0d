import Foundation
import Parley

// Signs a user in with tokens from the app's server, sends one message and prints what arrives for a few seconds.
//
//     swift run LightApp http://127.0.0.1:8080 APP_ID REST_API_KEY alice bob
//
// The REST API key stands in for the app's own server here (a real app asks its server for tokens and never holds the
// key).
let arguments = CommandLine.arguments
guard arguments.count == 6, let serverURL = URL(string: arguments[1]) else {
    print("usage: LightApp SERVER_URL APP_ID REST_API_KEY UID PEER")
    exit(2)
}
let (appId, apiKey, uid, peer) = (arguments[2], arguments[3], arguments[4], arguments[5])
let backend = ParleyAdmin(serverURL: serverURL, restAPIKey: apiKey)
let settings = AppSettings.Builder()
    .serverURL(serverURL)
    .storageDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("light-app-\(uid)"))
    .tokenProvider { uid in try await backend.issueAuthToken(uid: uid, ttlSeconds: 3600).authToken }
    .build()
let client = try await ParleyClient.initialize(appId: appId, settings: settings)
if client.getLoggedInUser()?.uid != uid {
    for user in [uid, peer] { _ = try? await backend.createUser(uid: user) }  // already there: fine
    try await client.login(uid: uid, tokenProvider: settings.tokenProvider!)
}
let sent = try await client.sendTextMessage("Hello from LightApp \(ParleyRelease.version)", to: .user(peer))
print("sent \(sent.id) at seq \(sent.seq) in \(sent.conversationId)")
let events = Task {
    for await event in client.events() { print("event \(event.name.rawValue)") }
}
try await Task.sleep(for: .seconds(3))
events.cancel()
await client.shutdown()
