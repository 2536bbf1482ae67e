import Foundation
import XCTest

// The media tests again with the services keeping their images in an S3 bucket (moto's server, checking every
// request's signature: `S3StandIn`) instead of the harness's folder: the same uploads, renditions, views and
// refusals, and after each test nothing of an image is in PostgreSQL and every stored image is in the bucket. One
// stand-in per class (moto takes seconds to start); each test's objects are under its own media ids. Linux's test
// discovery lists a class's inherited tests only when it declares a test itself: each variant declares the tests it
// runs again.

/// `ImagePipelineTests` on S3: uploads in stories, chat and dispatch, renditions, the views' sizes, the bomb.
final class ImagePipelineInABucketTests: ImagePipelineTests {
    nonisolated(unsafe) static var s3: S3StandIn?
    override class func setUp() { super.setUp(); s3 = try? S3StandIn() }
    override class func tearDown() { s3?.stop(); s3 = nil; super.tearDown() }
    override var mediaSettings: [String: String] { Self.s3?.environment ?? [:] }

    override func setUpWithError() throws {
        guard Self.s3 != nil else { throw TestFailure("the S3 stand-in did not start") }
        try super.setUpWithError()
    }

    /// Before `ServiceTestCase.tearDown` drops the database (corelibs XCTest calls `tearDown` before `tearDownWithError`).
    override func tearDown() {
        if let s3 = Self.s3, let database { XCTAssertNoThrow(try s3.assertImagesAreHereOnly(database)) }
        super.tearDown()
    }

    override func testEveryFormatIsStoredUprightAsAJPEGWithoutItsMetadata() throws { try super.testEveryFormatIsStoredUprightAsAJPEGWithoutItsMetadata() }
    override func testAnIPhonePhotoUploadsInStoriesChatAndDispatch() throws { try super.testAnIPhonePhotoUploadsInStoriesChatAndDispatch() }
    override func testADecompressionBombIsRefusedBeforeItIsDecoded() throws { try super.testADecompressionBombIsRefusedBeforeItIsDecoded() }
    override func testHTMLBehindAnHEICTypeIsRefused() throws { try super.testHTMLBehindAnHEICTypeIsRefused() }
    override func testAStoryListGivesEachPhotoItsSizesDimensionsAndPlaceholder() throws {
        try super.testAStoryListGivesEachPhotoItsSizesDimensionsAndPlaceholder()
    }
}

/// The image tests of `StoriesContentTests` on S3: types from the bytes, who sees them, the signed URLs of every view,
/// a removed member's loss of them. Its other tests have no image in them (the newsletter's photos in a browser are
/// the same URLs as `testImagesLoadByTheSignedURLsTheViewsGive`'s) and are skipped before anything starts.
final class StoriesContentInABucketTests: StoriesContentTests {
    static let imageTests = ["testMediaTypesComeFromTheBytesAndOnlyMembersSeeThem", "testImagesLoadByTheSignedURLsTheViewsGive",
                             "testARemovedMemberLosesAccessToTheGroupsStoriesAndMedia"]
    nonisolated(unsafe) static var s3: S3StandIn?
    override class func setUp() { super.setUp(); s3 = try? S3StandIn() }
    override class func tearDown() { s3?.stop(); s3 = nil; super.tearDown() }
    override var mediaSettings: [String: String] { Self.s3?.environment ?? [:] }

    override func setUpWithError() throws {
        guard Self.imageTests.contains(where: name.contains) else { throw XCTSkip("no image in it: run on the folder store only") }
        guard Self.s3 != nil else { throw TestFailure("the S3 stand-in did not start") }
        try super.setUpWithError()
    }

    /// Before `ServiceTestCase.tearDown` drops the database (corelibs XCTest calls `tearDown` before `tearDownWithError`).
    override func tearDown() {
        if let s3 = Self.s3, let database { XCTAssertNoThrow(try s3.assertImagesAreHereOnly(database)) }
        super.tearDown()
    }

    override func testMediaTypesComeFromTheBytesAndOnlyMembersSeeThem() throws { try super.testMediaTypesComeFromTheBytesAndOnlyMembersSeeThem() }
    override func testImagesLoadByTheSignedURLsTheViewsGive() throws { try super.testImagesLoadByTheSignedURLsTheViewsGive() }
    override func testARemovedMemberLosesAccessToTheGroupsStoriesAndMedia() throws {
        try super.testARemovedMemberLosesAccessToTheGroupsStoriesAndMedia()
    }
}
